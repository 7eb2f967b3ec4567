#!/usr/bin/env bash
# Installs the Python tools the integration tests drive (the official OpenStack CLI) into a venv
# under the cache dir, pinned, so the tests see exactly the client real users run.
# Idempotent: a venv that already holds the pinned version is left alone.
set -euo pipefail

OPENSTACKCLIENT_VERSION="10.5.0"
# `openstack loadbalancer ...` (Octavia) is a plugin of the CLI.
OCTAVIACLIENT_VERSION="3.15.0"

HYPERCLOUD_CACHE="${HYPERCLOUD_CACHE:-$HOME/.cache/hypercloud}"
VENV="$HYPERCLOUD_CACHE/venv"
STAMP="$VENV/.python-openstackclient-$OPENSTACKCLIENT_VERSION-octaviaclient-$OCTAVIACLIENT_VERSION"

if [[ -f "$STAMP" && -x "$VENV/bin/openstack" ]]; then
    echo "python-openstackclient $OPENSTACKCLIENT_VERSION, python-octaviaclient $OCTAVIACLIENT_VERSION already in $VENV"
    exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null || { echo "error: $PYTHON not found (needed for python-openstackclient)" >&2; exit 1; }

mkdir -p "$HYPERCLOUD_CACHE"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "python-openstackclient==$OPENSTACKCLIENT_VERSION" \
    "python-octaviaclient==$OCTAVIACLIENT_VERSION"
"$VENV/bin/openstack" --version
rm -f "$VENV"/.python-openstackclient-*
touch "$STAMP"
echo "python-openstackclient $OPENSTACKCLIENT_VERSION, python-octaviaclient $OCTAVIACLIENT_VERSION installed in $VENV"
