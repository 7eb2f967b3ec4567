#!/usr/bin/env python3
"""Microsoft's Azure SDK for Python (azure-identity, azure-mgmt-resource; pinned in
hack/python-tools.sh) against a running local cloud's Azure dialect, served over TLS.

Run by pkg/localcloud/tests/it/azure.rs with AZURE_ENDPOINT (the API URL, https), AZURE_TENANT_ID,
AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_LOCATION set, REQUESTS_CA_BUNDLE naming the
cloud's CA, AZURE_CLIENT_CERTIFICATE_PATH a certificate+key PEM file registered for the client
(`local-cloud entra-certificate add`) and AZURE_CLIENT_UNREGISTERED_CERTIFICATE_PATH one that is
not; AZURE_POD_IDENTITY_AUTHORITY_HOST is the metadata listener (http) and AZURE_IMDS_INSTANCE
the name of a VM the test made through Resource Manager in group AZURE_IMDS_GROUP. The
credentials are pointed at the cloud as their authority, with MSAL's instance discovery off (it
would ask login.microsoftonline.com). Every check is an assert; the first failure exits non-zero
with its message. Covers: a client-secret token from Entra's endpoint (and a wrong secret
refused with AADSTS7000215), a certificate credential's token (its client assertion checked
against the registered certificate; an unregistered certificate refused with AADSTS700027), a
managed identity token from the instance metadata service (the VM named by X-Instance-ID, the
local cloud's stand-in for the source address; another identity's client_id unavailable), the
subscription, resource groups (create, update of tags, get whatever the case, check_existence,
list paged by top, delete as a long-running operation polled to its end) and ARM's errors as
the SDK's typed exceptions (ResourceNotFoundError, HttpResponseError with ARM's code).
"""
import faulthandler
import os
import sys

from azure.core.exceptions import ClientAuthenticationError, HttpResponseError, ResourceNotFoundError
from azure.identity import (CertificateCredential, ClientSecretCredential, CredentialUnavailableError,
                            ManagedIdentityCredential)
from azure.mgmt.resource import ResourceManagementClient, SubscriptionClient

ENDPOINT = os.environ["AZURE_ENDPOINT"]
TENANT = os.environ["AZURE_TENANT_ID"]
CLIENT = os.environ["AZURE_CLIENT_ID"]
SECRET = os.environ["AZURE_CLIENT_SECRET"]
LOCATION = os.environ["AZURE_LOCATION"]
CERTIFICATE = os.environ["AZURE_CLIENT_CERTIFICATE_PATH"]
UNREGISTERED = os.environ["AZURE_CLIENT_UNREGISTERED_CERTIFICATE_PATH"]
IMDS = os.environ["AZURE_POD_IDENTITY_AUTHORITY_HOST"]
INSTANCE = os.environ["AZURE_IMDS_INSTANCE"]
IMDS_GROUP = os.environ["AZURE_IMDS_GROUP"]
SCOPE = "https://management.azure.com/.default"


def credential(secret):
    return ClientSecretCredential(TENANT, CLIENT, secret, authority=ENDPOINT,
                                  disable_instance_discovery=True)


def certificate_credential(path):
    return CertificateCredential(TENANT, CLIENT, certificate_path=path, authority=ENDPOINT,
                                 disable_instance_discovery=True)


def main():
    assert ENDPOINT.startswith("https://"), ENDPOINT
    cred = credential(SECRET)
    token = cred.get_token(SCOPE)
    assert token.token.count(".") == 2, "the access token is a JWT"
    try:
        credential("wrong").get_token(SCOPE)
        raise AssertionError("a wrong secret got a token")
    except ClientAuthenticationError as e:
        assert "AADSTS7000215" in str(e), e

    # A certificate credential: its RS256 assertion (x5t, float exp/iat) is checked against the
    # certificate registered for the client, and its token works on Resource Manager.
    by_cert = certificate_credential(CERTIFICATE)
    assert by_cert.get_token(SCOPE).token.count(".") == 2
    subs = list(SubscriptionClient(by_cert, base_url=ENDPOINT).subscriptions.list())
    assert len(subs) == 1 and subs[0].tenant_id == TENANT, subs
    try:
        certificate_credential(UNREGISTERED).get_token(SCOPE)
        raise AssertionError("an unregistered certificate got a token")
    except ClientAuthenticationError as e:
        assert "AADSTS700027" in str(e), e

    # A managed identity: ManagedIdentityCredential asks IMDS (plain http, `Metadata: true`) as
    # the VM; the token works on Resource Manager. A client_id of another identity is
    # "Identity not found" (400), which the credential reports as unavailable.
    assert IMDS.startswith("http://"), IMDS
    managed = ManagedIdentityCredential(headers={"X-Instance-ID": INSTANCE})
    assert managed.get_token(SCOPE).token.count(".") == 2
    try:
        ManagedIdentityCredential(client_id="00000000-0000-0000-0000-000000000001",
                                  headers={"X-Instance-ID": INSTANCE}).get_token(SCOPE)
        raise AssertionError("another identity's client_id got a token")
    except CredentialUnavailableError as e:
        assert "Identity not found" in str(e), e

    subs = list(SubscriptionClient(cred, base_url=ENDPOINT).subscriptions.list())
    assert len(subs) == 1, subs
    sub = subs[0]
    assert sub.tenant_id == TENANT, sub
    assert sub.state == "Enabled", sub
    sid = sub.subscription_id

    rm = ResourceManagementClient(cred, sid, base_url=ENDPOINT)
    groups = rm.resource_groups
    by_identity = ResourceManagementClient(managed, sid, base_url=ENDPOINT).resource_groups
    assert by_identity.get(IMDS_GROUP).name == IMDS_GROUP
    made = groups.create_or_update("conformance-rg", {"location": LOCATION, "tags": {"a": "1"}})
    assert made.name == "conformance-rg" and made.location == LOCATION, made
    assert made.properties.provisioning_state == "Succeeded", made
    assert made.id == f"/subscriptions/{sid}/resourceGroups/conformance-rg", made.id
    updated = groups.create_or_update("conformance-rg", {"location": LOCATION, "tags": {"a": "2"}})
    assert updated.tags == {"a": "2"}, updated.tags
    assert groups.get("CONFORMANCE-RG").name == "conformance-rg"
    assert groups.check_existence("conformance-rg") is True
    assert groups.check_existence("no-such-rg") is False
    groups.create_or_update("conformance-rg-2", {"location": LOCATION})
    # (The VM's group, made before, is not this script's.)
    names = [g.name for g in groups.list(top=1) if g.name != IMDS_GROUP]
    assert names == ["conformance-rg", "conformance-rg-2"], names

    try:
        groups.create_or_update("elsewhere", {"location": "westeurope"})
        raise AssertionError("a group outside the cloud's location was made")
    except HttpResponseError as e:
        assert e.error.code == "LocationNotAvailableForResourceGroup", e.error
    try:
        groups.get("no-such-rg")
        raise AssertionError("a missing group was found")
    except ResourceNotFoundError as e:
        assert e.error.code == "ResourceGroupNotFound", e.error

    poller = groups.begin_delete("conformance-rg-2", polling_interval=0.1)
    poller.result(timeout=60)
    assert poller.status().lower() == "succeeded", poller.status()
    assert groups.check_existence("conformance-rg-2") is False
    groups.begin_delete("conformance-rg").result(timeout=60)
    assert [g.name for g in groups.list()] == [IMDS_GROUP]
    print("azure conformance: ok")


if __name__ == "__main__":
    # A hang (a poll that never ends) becomes a traceback and a failure, not a stuck test.
    faulthandler.dump_traceback_later(int(os.environ.get("AZURE_CONFORMANCE_TIMEOUT", "120")), exit=True)
    try:
        main()
    except AssertionError as e:
        print(f"azure conformance: FAILED: {e}", file=sys.stderr)
        raise
