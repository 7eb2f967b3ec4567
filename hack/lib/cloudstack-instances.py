#!/usr/bin/env python3
"""An Apache CloudStack account's virtual machines and load-balancer rules, as the cloudstack
provider reaches them, for hack/lib/kubelet-power.py and hack/lib/cloud-cloudstack.sh:

    cloudstack-instances.py CLOUDSTACK.CONF              the VMs, as JSON
    cloudstack-instances.py CLOUDSTACK.CONF lb-rules     the load-balancer rules, each with its
                                                         VMs and its public IP's firewall rules,
                                                         as JSON

reads the cloudstack provider's cloud config ([Global] api-url: the query API's /client/api,
api-key, secret-key, optional project-id) and signs each request as CloudStack's clients do
(Exoscale's `cs`: every parameter but the signature sorted by name as name=value, the value
encoded as java.net.URLEncoder with `+` as %20, joined by &, lower-cased, HMAC-SHA1 with the
secret key, base64). The VM list is what the provider asks, listVirtualMachines (listall, the
project when configured, following `page`): a JSON list of {"name": the VM's name (the Node's
name), "id": the VM ID (the end of the Node's providerID cloudstack://<id>), "status": "ACTIVE"
for a Running VM, "SHUTOFF" for a Stopped one (another state as CloudStack spells it), "state":
CloudStack's, "zone": its zone's name, "offering": its service offering, "address": the
first NIC's IP}. lb-rules is listLoadBalancerRules, and per rule listLoadBalancerRuleInstances
and listFirewallRules of its public IP.

The keys stay in the file, never on a command line or in an error. An API that does not answer
or answers an error is an error (exit 1) naming the command and CloudStack's errorcode and
errortext.
"""
import base64
import configparser
import hashlib
import hmac
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

PAGE = 500


def read_config(path):
    """The [Global] keys, lower-cased (a value may be double-quoted)."""
    c = configparser.ConfigParser(interpolation=None, strict=False)
    with open(path) as f:
        c.read_file(f)
    g = {}
    for s in c.sections():
        if s.lower() == "global":
            for k, v in c.items(s):
                v = v.strip()
                g[k.lower()] = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
    if not (g.get("api-url") and g.get("api-key") and g.get("secret-key")):
        raise ValueError("%s: [Global] api-url, api-key and secret-key are required" % path)
    return g


def cs_encode(value):
    """java.net.URLEncoder.encode(value).replace('+', '%20'), as cs encodes before signing."""
    return urllib.parse.quote(str(value), safe="*")


def call(g, command, **params):
    """One signed GET of COMMAND; the answer's `<command>response` object."""
    data = {k: str(v) for k, v in params.items()}
    data.update(command=command, response="json", apiKey=g["api-key"])
    if g.get("project-id") and command not in ("listZones",):
        data.setdefault("projectid", g["project-id"])
    signed = "&".join("%s=%s" % (k, cs_encode(v)) for k, v in sorted(data.items()))
    digest = hmac.new(g["secret-key"].encode(), signed.lower().encode(), hashlib.sha1).digest()
    data["signature"] = base64.b64encode(digest).decode().strip()
    url = g["api-url"].rstrip("/") + "?" + urllib.parse.urlencode(sorted(data.items()), quote_via=urllib.parse.quote)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "application/json"}), timeout=10) as r:
            answer = json.load(r)
    except urllib.error.HTTPError as e:
        detail = e.read(2000).decode("utf-8", "replace")
        try:
            body = next(iter(json.loads(detail).values()))
            detail = "errorcode %s: %s" % (body.get("errorcode"), body.get("errortext"))
        except (ValueError, StopIteration, AttributeError):
            pass
        raise RuntimeError("%s (%s): HTTP %s: %s" % (command, g["api-url"], e.code, detail.strip()))
    except (OSError, ValueError) as e:
        raise RuntimeError("%s (%s): %s" % (command, g["api-url"], e))
    return answer.get(command.lower() + "response", {})


def list_all(g, command, entity, **params):
    """Every item of a list command, page by page."""
    out, page = [], 1
    while True:
        got = call(g, command, page=page, pagesize=PAGE, **params)
        items = got.get(entity) or []
        out.extend(items)
        if len(items) < PAGE or len(out) >= int(got.get("count", 0)):
            return out
        page += 1


def vms(g):
    out = []
    for vm in list_all(g, "listVirtualMachines", "virtualmachine", listall="true"):
        nics = vm.get("nic") or []
        nic = next((n for n in nics if n.get("isdefault")), nics[0] if nics else {})
        status = {"Running": "ACTIVE", "Stopped": "SHUTOFF"}.get(vm.get("state"), vm.get("state", ""))
        out.append({"name": vm.get("name", ""), "id": vm["id"], "status": status, "state": vm.get("state", ""),
                    "zone": vm.get("zonename", ""), "offering": vm.get("serviceofferingname", ""),
                    "address": nic.get("ipaddress", "")})
    return sorted(out, key=lambda v: (len(v["name"]), v["name"]))


def lb_rules(g):
    out = []
    for rule in list_all(g, "listLoadBalancerRules", "loadbalancerrule", listall="true"):
        members = list_all(g, "listLoadBalancerRuleInstances", "loadbalancerruleinstance", id=rule["id"])
        firewall = list_all(g, "listFirewallRules", "firewallrule", ipaddressid=rule["publicipid"])
        out.append({"name": rule.get("name"), "id": rule["id"], "publicip": rule.get("publicip"),
                    "publicport": rule.get("publicport"), "privateport": rule.get("privateport"),
                    "protocol": rule.get("protocol"), "algorithm": rule.get("algorithm"),
                    "vms": sorted(m.get("name", m["id"]) for m in members),
                    "firewall": [{"protocol": f.get("protocol"), "ports": "%s-%s" % (f.get("startport"), f.get("endport")),
                                  "cidrlist": f.get("cidrlist")} for f in firewall]})
    return out


def main():
    args = sys.argv[1:]
    if len(args) not in (1, 2) or (len(args) == 2 and args[1] != "lb-rules"):
        print("usage: cloudstack-instances.py CLOUDSTACK.CONF [lb-rules]", file=sys.stderr)
        return 2
    try:
        g = read_config(args[0])
        print(json.dumps(lb_rules(g) if len(args) == 2 else vms(g)))
    except (OSError, ValueError, KeyError, RuntimeError, configparser.Error) as e:
        print("cloudstack-instances: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
