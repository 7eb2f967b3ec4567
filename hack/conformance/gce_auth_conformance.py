#!/usr/bin/env python3
"""Google's own auth library (google-auth, in the venv of hack/python-tools.sh gce) against a
running local cloud started with --gce-require-tokens: service-account keys and the token
endpoint.

Run by cmd/hypercloud/tests/it/local_cloud_gce.rs with GCE_ENDPOINT (the API URL), GCE_PROJECT,
GCE_ZONE, GCE_KEY_FILE (a key file `local-cloud gce-service-account-key create` wrote) and
GCE_STRANGER_KEY (a PEM RSA key the cloud never issued). Every check is an assert; the first
failure exits non-zero with its message. Covers: Credentials.from_service_account_file +
refresh gets a token (expiry set), google-cloud-compute with those credentials lists zones
while anonymous credentials get 401; the same file with a stranger's private key, an unknown
account, or a tampered audience is refused with google-auth's RefreshError carrying Google's
error (invalid_grant).
"""
import json
import os
import tempfile

import google.auth.transport.requests
from google.api_core import exceptions
from google.api_core.client_options import ClientOptions
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from google.oauth2 import service_account

ENDPOINT = os.environ["GCE_ENDPOINT"]
PROJECT = os.environ["GCE_PROJECT"]
ZONE = os.environ["GCE_ZONE"]
KEY_FILE = os.environ["GCE_KEY_FILE"]
STRANGER_KEY = os.environ["GCE_STRANGER_KEY"]
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def zones(credentials):
    c = compute_v1.ZonesClient(
        credentials=credentials,
        transport="rest",
        client_options=ClientOptions(api_endpoint=ENDPOINT),
    )
    return [z.name for z in c.list(project=PROJECT)]


def refused(info, what):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(info, f)
        path = f.name
    try:
        creds = service_account.Credentials.from_service_account_file(path, scopes=SCOPES)
        try:
            creds.refresh(google.auth.transport.requests.Request())
        except auth_exceptions.RefreshError as e:
            assert "invalid_grant" in str(e), f"{what}: {e}"
            print(f"  {what}: RefreshError: {e}")
            return
        raise AssertionError(f"{what}: a token was issued")
    finally:
        os.unlink(path)


def main():
    with open(KEY_FILE) as f:
        info = json.load(f)
    assert info["type"] == "service_account", info.keys()
    assert info["token_uri"].startswith(ENDPOINT), info["token_uri"]

    creds = service_account.Credentials.from_service_account_file(KEY_FILE, scopes=SCOPES)
    creds.refresh(google.auth.transport.requests.Request())
    assert creds.token and creds.valid, "no token"
    assert creds.expiry is not None, "no expiry"
    print(f"  token for {creds.service_account_email}, expires {creds.expiry.isoformat()}")

    names = zones(creds)
    assert ZONE in names, names
    print(f"  zones with the key's token: {names}")
    try:
        zones(AnonymousCredentials())
        raise AssertionError("anonymous credentials were served")
    except exceptions.Unauthorized as e:
        print(f"  anonymous: 401 {e.message}")

    with open(STRANGER_KEY) as f:
        stranger = dict(info, private_key=f.read())
    refused(stranger, "a key the cloud did not issue")
    refused(
        dict(stranger, private_key_id="0" * 40, client_email="nobody@demo.iam.gserviceaccount.com"),
        "an unknown account",
    )
    refused(dict(info, token_uri=ENDPOINT + "/token?x=1"), "an assertion for another audience")
    print("gce auth conformance: ok")


if __name__ == "__main__":
    main()
