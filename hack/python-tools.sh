#!/usr/bin/env bash
# Installs the Python tools the integration tests drive into a venv under the cache dir, pinned,
# so the tests see exactly the clients real users run: the official OpenStack CLI (with its
# Octavia plugin) and openstacksdk (the library the CLI, Ansible and many tools are built on,
# driven directly by hack/conformance/openstacksdk_conformance.py).
# Idempotent: each tool has its own stamp, and a venv that already holds a pinned version is left
# alone.
#
#   hack/python-tools.sh        the OpenStack CLI and openstacksdk (venv $HYPERCLOUD_CACHE/venv)
#   hack/python-tools.sh aws    moto server and the aws CLI (venv $HYPERCLOUD_CACHE/venv-aws; a venv
#                               of their own, as moto and awscli pin botocore between them)
#   hack/python-tools.sh gce    Google's Compute Engine client library, google-cloud-compute (venv
#                               $HYPERCLOUD_CACHE/venv-gce; its own, as it pins protobuf and
#                               google-auth), driven by hack/conformance/gce_conformance.py
#   hack/python-tools.sh azure  Microsoft's Azure SDK: azure-identity, azure-mgmt-resource,
#                               azure-mgmt-compute, azure-mgmt-network (venv
#                               $HYPERCLOUD_CACHE/venv-azure), driven by
#                               hack/conformance/azure_conformance.py
#   hack/python-tools.sh ovirt  oVirt's Python SDK, ovirt-engine-sdk-python (venv
#                               $HYPERCLOUD_CACHE/venv-ovirt; it builds a small C extension
#                               against libxml2 and takes pycurl's wheel), driven by
#                               hack/conformance/ovirt_sdk_conformance.py
#   hack/python-tools.sh rackspace
#                               Rackspace's keystoneauth plugin, rackspaceauth, with openstacksdk
#                               (venv $HYPERCLOUD_CACHE/venv-rackspace), driven by
#                               hack/conformance/rackspace_conformance.py
#   hack/python-tools.sh cloudstack
#                               Exoscale's CloudStack client, cs (venv
#                               $HYPERCLOUD_CACHE/venv-cloudstack), driven by
#                               hack/conformance/cloudstack_conformance.py
#   hack/python-tools.sh azure-cli
#                               Microsoft's az CLI (venv $HYPERCLOUD_CACHE/venv-azure-cli; its
#                               own, as azure-cli 2.91.0 pins azure-mgmt-compute~=34.1.0;
#                               docs/azure-clients.md), driven by
#                               hack/conformance/azure_cli_conformance.sh
set -euo pipefail

# The AWS simulator and the official AWS CLI (the aws provider's tests; hack/aws-tools.sh).
MOTO_VERSION="5.2.5"
AWSCLI_VERSION="1.46.2"

# Google's official Compute Engine client (REST transport), the referee of the GCE dialect.
GOOGLE_CLOUD_COMPUTE_VERSION="1.57.0"

# Microsoft's Azure SDK for Python, the referee of the Azure dialect (docs/azure-clients.md);
# azure-mgmt-resource at the version azure-cli 2.91.0 pins.
AZURE_IDENTITY_VERSION="1.27.0"
AZURE_MGMT_RESOURCE_VERSION="24.0.0"
AZURE_MGMT_COMPUTE_VERSION="39.0.0"
AZURE_MGMT_NETWORK_VERSION="33.1.0"
AZURE_CLI_VERSION="2.91.0"

# oVirt's Python SDK (v4 API), the referee of the oVirt dialect.
OVIRT_SDK_VERSION="4.6.3"
RACKSPACEAUTH_VERSION="0.8.1"
# Exoscale's CloudStack client (it signs as CloudStack verifies), the referee of the CloudStack
# dialect.
CS_VERSION="5.2.0"

OPENSTACKCLIENT_VERSION="10.5.0"
# `openstack loadbalancer ...` (Octavia) is a plugin of the CLI.
OCTAVIACLIENT_VERSION="3.15.0"
OPENSTACKSDK_VERSION="4.22.0"

HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
VENV="$HYPERCLOUD_CACHE/venv"
CLI_STAMP="$VENV/.python-openstackclient-$OPENSTACKCLIENT_VERSION-octaviaclient-$OCTAVIACLIENT_VERSION"
SDK_STAMP="$VENV/.openstacksdk-$OPENSTACKSDK_VERSION"

PYTHON="${PYTHON:-python3}"
pip_install() {
    command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found (needed for $*)" >&2; exit 1; }
    mkdir -p "$HYPERCLOUD_CACHE"
    [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}

if [[ "${1:-}" == aws ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-aws"
    STAMP="$VENV/.moto-$MOTO_VERSION-awscli-$AWSCLI_VERSION"
    if [[ -f "$STAMP" && -x "$VENV/bin/moto_server" && -x "$VENV/bin/aws" ]]; then
        echo "moto $MOTO_VERSION, awscli $AWSCLI_VERSION already in $VENV"
        exit 0
    fi
    pip_install "moto[server]==$MOTO_VERSION" "awscli==$AWSCLI_VERSION"
    "$VENV/bin/aws" --version
    rm -f "$VENV"/.moto-*
    touch "$STAMP"
    echo "moto $MOTO_VERSION, awscli $AWSCLI_VERSION installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == gce ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-gce"
    STAMP="$VENV/.google-cloud-compute-$GOOGLE_CLOUD_COMPUTE_VERSION"
    if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c 'from google.cloud import compute_v1' 2>/dev/null; then
        echo "google-cloud-compute $GOOGLE_CLOUD_COMPUTE_VERSION already in $VENV"
        exit 0
    fi
    pip_install "google-cloud-compute==$GOOGLE_CLOUD_COMPUTE_VERSION"
    got="$("$VENV/bin/python" -c 'from google.cloud.compute_v1 import gapic_version as v; print(v.__version__)')"
    [[ "$got" == "$GOOGLE_CLOUD_COMPUTE_VERSION" ]] || { echo "error: google-cloud-compute $got in $VENV, want $GOOGLE_CLOUD_COMPUTE_VERSION" >&2; exit 1; }
    rm -f "$VENV"/.google-cloud-compute-*
    touch "$STAMP"
    echo "google-cloud-compute $GOOGLE_CLOUD_COMPUTE_VERSION installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == azure ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-azure"
    want="$AZURE_IDENTITY_VERSION $AZURE_MGMT_RESOURCE_VERSION $AZURE_MGMT_COMPUTE_VERSION $AZURE_MGMT_NETWORK_VERSION"
    STAMP="$VENV/.azure-${want// /-}"
    if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c 'import azure.identity, azure.mgmt.resource, azure.mgmt.compute, azure.mgmt.network' 2>/dev/null; then
        echo "azure-identity, azure-mgmt-resource, -compute, -network ($want) already in $VENV"
        exit 0
    fi
    pip_install "azure-identity==$AZURE_IDENTITY_VERSION" "azure-mgmt-resource==$AZURE_MGMT_RESOURCE_VERSION" \
        "azure-mgmt-compute==$AZURE_MGMT_COMPUTE_VERSION" "azure-mgmt-network==$AZURE_MGMT_NETWORK_VERSION"
    got="$("$VENV/bin/python" -c 'from azure.identity._version import VERSION as a; from azure.mgmt.resource._version import VERSION as b; from azure.mgmt.compute._version import VERSION as c; from azure.mgmt.network._version import VERSION as d; print(a, b, c, d)')"
    [[ "$got" == "$want" ]] || { echo "error: the Azure SDK in $VENV is $got, want $want" >&2; exit 1; }
    rm -f "$VENV"/.azure-*
    touch "$STAMP"
    echo "azure-identity, azure-mgmt-resource, -compute, -network ($want) installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == ovirt ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-ovirt"
    STAMP="$VENV/.ovirt-engine-sdk-python-$OVIRT_SDK_VERSION"
    if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c 'import ovirtsdk4' 2>/dev/null; then
        echo "ovirt-engine-sdk-python $OVIRT_SDK_VERSION already in $VENV"
        exit 0
    fi
    pip_install "ovirt-engine-sdk-python==$OVIRT_SDK_VERSION"
    got="$("$VENV/bin/python" -c 'from ovirtsdk4.version import VERSION as v; print(v)')"
    [[ "$got" == "$OVIRT_SDK_VERSION" ]] || { echo "error: ovirt-engine-sdk-python $got in $VENV, want $OVIRT_SDK_VERSION" >&2; exit 1; }
    rm -f "$VENV"/.ovirt-engine-sdk-python-*
    touch "$STAMP"
    echo "ovirt-engine-sdk-python $OVIRT_SDK_VERSION installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == rackspace ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-rackspace"
    want="rackspaceauth-$RACKSPACEAUTH_VERSION-openstacksdk-$OPENSTACKSDK_VERSION"
    STAMP="$VENV/.$want"
    if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c 'import rackspaceauth.v2, openstack' 2>/dev/null; then
        echo "rackspaceauth $RACKSPACEAUTH_VERSION and openstacksdk $OPENSTACKSDK_VERSION already in $VENV"
        exit 0
    fi
    pip_install "rackspaceauth==$RACKSPACEAUTH_VERSION" "openstacksdk==$OPENSTACKSDK_VERSION"
    got="$("$VENV/bin/python" -c 'from importlib.metadata import version as v; print("rackspaceauth-%s-openstacksdk-%s" % (v("rackspaceauth"), v("openstacksdk")))')"
    [[ "$got" == "$want" ]] || { echo "error: $got in $VENV, want $want" >&2; exit 1; }
    rm -f "$VENV"/.rackspaceauth-*
    touch "$STAMP"
    echo "rackspaceauth $RACKSPACEAUTH_VERSION and openstacksdk $OPENSTACKSDK_VERSION installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == cloudstack ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-cloudstack"
    STAMP="$VENV/.cs-$CS_VERSION"
    if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c 'import cs' 2>/dev/null; then
        echo "cs $CS_VERSION already in $VENV"
        exit 0
    fi
    pip_install "cs==$CS_VERSION"
    got="$("$VENV/bin/python" -c 'from importlib.metadata import version as v; print(v("cs"))')"
    [[ "$got" == "$CS_VERSION" ]] || { echo "error: cs $got in $VENV, want $CS_VERSION" >&2; exit 1; }
    rm -f "$VENV"/.cs-*
    touch "$STAMP"
    echo "cs $CS_VERSION installed in $VENV"
    exit 0
fi

if [[ "${1:-}" == azure-cli ]]; then
    VENV="$HYPERCLOUD_CACHE/venv-azure-cli"
    STAMP="$VENV/.azure-cli-$AZURE_CLI_VERSION"
    if [[ -f "$STAMP" && -x "$VENV/bin/az" ]]; then
        echo "azure-cli $AZURE_CLI_VERSION already in $VENV"
        exit 0
    fi
    pip_install "azure-cli==$AZURE_CLI_VERSION"
    got="$("$VENV/bin/python" -c 'from azure.cli.core import __version__ as v; print(v)')"
    [[ "$got" == "$AZURE_CLI_VERSION" ]] || { echo "error: azure-cli $got in $VENV, want $AZURE_CLI_VERSION" >&2; exit 1; }
    rm -f "$VENV"/.azure-cli-*
    touch "$STAMP"
    echo "azure-cli $AZURE_CLI_VERSION installed in $VENV"
    exit 0
fi

if [[ -f "$CLI_STAMP" && -x "$VENV/bin/openstack" ]]; then
    echo "python-openstackclient $OPENSTACKCLIENT_VERSION, python-octaviaclient $OCTAVIACLIENT_VERSION already in $VENV"
else
    # The CLI pulls in openstacksdk; pin it in the same resolve so the two agree.
    pip_install "python-openstackclient==$OPENSTACKCLIENT_VERSION" \
        "python-octaviaclient==$OCTAVIACLIENT_VERSION" \
        "openstacksdk==$OPENSTACKSDK_VERSION"
    "$VENV/bin/openstack" --version
    rm -f "$VENV"/.python-openstackclient-*
    touch "$CLI_STAMP"
    echo "python-openstackclient $OPENSTACKCLIENT_VERSION, python-octaviaclient $OCTAVIACLIENT_VERSION installed in $VENV"
fi

if [[ -f "$SDK_STAMP" ]] && "$VENV/bin/python" -c 'import openstack' 2>/dev/null; then
    echo "openstacksdk $OPENSTACKSDK_VERSION already in $VENV"
else
    pip_install "openstacksdk==$OPENSTACKSDK_VERSION"
    got="$("$VENV/bin/python" -c 'import openstack.version as v; print(v.__version__)')"
    [[ "$got" == "$OPENSTACKSDK_VERSION" ]] || { echo "error: openstacksdk $got in $VENV, want $OPENSTACKSDK_VERSION" >&2; exit 1; }
    rm -f "$VENV"/.openstacksdk-*
    touch "$SDK_STAMP"
    echo "openstacksdk $OPENSTACKSDK_VERSION installed in $VENV"
fi
