#!/usr/bin/env python3
"""Google's own auth library (google-auth, in the venv of hack/python-tools.sh gce) against a
running local cloud started with --gce-require-tokens: service-account keys and the token
endpoint.

Run by cmd/hypercloud/tests/it/local_cloud_gce.rs with GCE_ENDPOINT (the API URL), GCE_PROJECT,
GCE_ZONE, GCE_KEY_FILE (a key file `local-cloud gce-service-account-key create` wrote) and
GCE_STRANGER_KEY (a PEM RSA key the cloud never issued). Every check is an assert; the first
failure exits non-zero with its message. Covers: Credentials.from_service_account_file +
refresh gets a token (expiry set; google-auth signs for Google's own token URL as audience,
whatever token_uri says, and the cloud takes that as Google does) and the token is served;
google-cloud-compute with those credentials lists zones (GAPIC clients make google-auth send a
self-signed JWT instead, AIP-4111, which the cloud accepts as Google does) while anonymous
credentials get 401; the same file with a
stranger's private key or an unknown account, and assertions signed with the right key but for
another audience or already expired (google.auth.jwt + the library's jwt_grant), are refused
with google-auth's RefreshError carrying Google's error (invalid_grant).
"""
import json
import os
import tempfile
import time
import urllib.error
import urllib.request

import google.auth.transport.requests
from google.api_core.client_options import ClientOptions
from google.auth import crypt
from google.auth import exceptions as auth_exceptions
from google.auth import jwt
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1
from google.oauth2 import _client, service_account

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


def expect_refresh_error(what, call):
    try:
        call()
    except auth_exceptions.RefreshError as e:
        assert "invalid_grant" in str(e), f"{what}: {e}"
        print(f"  {what}: RefreshError: {e}")
        return
    raise AssertionError(f"{what}: a token was issued")


def grant(info, claims):
    signer = crypt.RSASigner.from_service_account_info(info)
    assertion = jwt.encode(signer, claims)
    return _client.jwt_grant(google.auth.transport.requests.Request(), info["token_uri"], assertion)


def refused(info, what):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(info, f)
        path = f.name
    try:
        creds = service_account.Credentials.from_service_account_file(path, scopes=SCOPES)
        expect_refresh_error(what, lambda: creds.refresh(google.auth.transport.requests.Request()))
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

    req = urllib.request.Request(
        f"{ENDPOINT}/compute/v1/projects/{PROJECT}/zones",
        headers={"Authorization": f"Bearer {creds.token}"},
    )
    with urllib.request.urlopen(req) as resp:
        assert resp.status == 200, resp.status
    req = urllib.request.Request(
        f"{ENDPOINT}/compute/v1/projects/{PROJECT}/zones",
        headers={"Authorization": "Bearer not-a-token"},
    )
    try:
        urllib.request.urlopen(req)
        raise AssertionError("a made-up token was served")
    except urllib.error.HTTPError as e:
        assert e.code == 401, e.code
    print("  the exchanged token is served; a made-up one gets 401")

    names = zones(creds)
    assert ZONE in names, names
    print(f"  zones with the key's token: {names}")
    # A 401 makes the library refresh its credentials, which anonymous ones cannot.
    try:
        zones(AnonymousCredentials())
        raise AssertionError("anonymous credentials were served")
    except auth_exceptions.InvalidOperation as e:
        print(f"  anonymous client: 401, then {e}")
    req = urllib.request.Request(f"{ENDPOINT}/compute/v1/projects/{PROJECT}/zones")
    try:
        urllib.request.urlopen(req)
        raise AssertionError("a request without a token was served")
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        assert e.code == 401 and body["error"]["errors"][0]["reason"] == "required", body
        assert e.headers.get("WWW-Authenticate", "").startswith("Bearer"), dict(e.headers)
    print("  without a token: 401 required")

    with open(STRANGER_KEY) as f:
        stranger = dict(info, private_key=f.read())
    refused(stranger, "a key the cloud did not issue")
    refused(
        dict(stranger, private_key_id="0" * 40, client_email="nobody@demo.iam.gserviceaccount.com"),
        "an unknown account",
    )
    now = int(time.time())
    claims = {"iss": info["client_email"], "scope": SCOPES[0], "iat": now, "exp": now + 3600}
    token, _, _ = grant(info, dict(claims, aud=info["token_uri"]))
    assert token, "no token for an assertion naming token_uri as audience (Go's oauth2 does)"
    expect_refresh_error(
        "an assertion for another audience",
        lambda: grant(info, dict(claims, aud="https://example.com/token")),
    )
    expect_refresh_error(
        "an expired assertion",
        lambda: grant(info, dict(claims, aud=info["token_uri"], iat=now - 7200, exp=now - 3600)),
    )
    print("gce auth conformance: ok")


if __name__ == "__main__":
    main()
