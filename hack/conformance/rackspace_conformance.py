#!/usr/bin/env python3
"""Rackspace's keystoneauth plugin (rackspaceauth) and openstacksdk against the local cloud's
Keystone v2.0 with Rackspace's API-key sign-in.

    rackspace_conformance.py AUTH_URL USERNAME PASSWORD SERVER_NAME SERVER_ID

AUTH_URL is the v2.0 identity (http://127.0.0.1:PORT/identity/v2.0/); the cloud holds the
server SERVER_NAME (ID SERVER_ID). Checked, as these clients see them: a password sign-in
(rackspaceauth.v2.Password) and the user's API key read from
/users/{id}/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials; an API-key sign-in
(rackspaceauth.v2.APIKey) whose catalog names Rackspace's services in the cloud's region;
openstacksdk listing and reading servers through that session; the token validated with
rackspaceauth.v2.validate; a wrong API key refused as keystoneauth's Unauthorized. Prints `ok`.
"""
import sys

import openstack
from keystoneauth1 import exceptions, session
from rackspaceauth import v2


def main():
    auth_url, username, password, name, server_id = sys.argv[1:6]
    if not auth_url.endswith("/"):
        auth_url += "/"

    # Password sign-in, then the user's API key as Rackspace's control panel showed it.
    pw = session.Session(auth=v2.Password(username=username, password=password, auth_url=auth_url))
    user_id = pw.get_user_id()
    key = pw.get(
        "%susers/%s/OS-KSADM/credentials/RAX-KSKEY:apiKeyCredentials" % (auth_url, user_id),
        authenticated=True,
    ).json()["RAX-KSKEY:apiKeyCredentials"]
    assert key["username"] == username, key
    api_key = key["apiKey"]
    print("password sign-in as", username, "-> API key of", len(api_key), "characters")

    # API-key sign-in: the token, its tenant and the catalog as Rackspace returned them.
    auth = v2.APIKey(username=username, api_key=api_key, auth_url=auth_url)
    sess = session.Session(auth=auth)
    access = auth.get_access(sess)
    assert access.auth_token, "no token"
    assert access.project_id, "the token has no tenant"
    catalog = {e["name"]: e for e in access.service_catalog.catalog}
    for service, kind in (("cloudServersOpenStack", "compute"), ("cloudBlockStorage", "volume")):
        assert service in catalog, sorted(catalog)
        assert catalog[service]["type"] == kind, catalog[service]
    region = catalog["cloudServersOpenStack"]["endpoints"][0]["region"]
    compute = auth.get_endpoint(sess, service_type="compute", interface="public", region_name=region)
    assert compute and compute.startswith("http"), compute
    print("API-key sign-in: tenant", access.project_id, "region", region, "compute", compute)

    # openstacksdk on that session: the servers, found and read.
    conn = openstack.connection.Connection(session=sess, region_name=region, compute_api_version="2")
    servers = list(conn.compute.servers())
    assert name in [s.name for s in servers], [s.name for s in servers]
    s = conn.compute.get_server(server_id)
    assert s.name == name and s.status == "ACTIVE", (s.name, s.status)
    assert s.addresses, "the server has no addresses"
    print("openstacksdk lists", len(servers), "servers; reads", s.name, s.status, sorted(s.addresses))

    # rackspaceauth.v2.validate: the token's own access, without a catalog.
    v = v2.validate(sess, access.auth_token, auth_url=auth_url)
    assert v["access"]["token"]["id"] == access.auth_token, v
    assert "serviceCatalog" not in v["access"], sorted(v["access"])

    # A wrong key is keystoneauth's Unauthorized (401), not some other failure.
    bad = session.Session(auth=v2.APIKey(username=username, api_key="0" * len(api_key), auth_url=auth_url))
    try:
        bad.get_token()
    except exceptions.Unauthorized as e:
        print("wrong API key refused:", type(e).__name__)
    else:
        raise AssertionError("a wrong API key was accepted")
    print("ok")


if __name__ == "__main__":
    main()
