#!/usr/bin/env python3
"""The image's software bill of materials (SPDX 2.3 JSON), as hack/image.sh writes and checks it.

    sbom.py write TREE OUT  --version V --commit C --created T --digest D --packages P
    sbom.py check SBOM TREE --version V --digest D --packages P

TREE: `cargo tree --locked -p hypercloud -e normal --target <host> --prefix none -f '{p}|{l}'`:
the crates the release build of the `hypercloud` package links (normal dependencies, its default
features, resolved for that platform alone), with their licences.
P: the image's Debian runtime packages, `name=version` separated by spaces or commas (its
io.hypercloud.runtime-packages label). T: RFC 3339 (the image's creation time,
SOURCE_DATE_EPOCH), so the document is the same bytes for the same commit.

`check` fails, naming the first difference, unless the SBOM is SPDX 2.3 describing hypercloud
at version V and image digest D, and lists exactly the crates (name and version) the tree
gives and exactly the runtime packages P.
"""
import argparse
import hashlib
import json
import sys


def crates(tree):
    """(name, version, license, source) of every crate hypercloud links, sorted, from TREE: the
    lines `name vVERSION[ (path or note)]|license` of `cargo tree -e normal -f '{p}|{l}'`."""
    out = set()
    for line in tree.splitlines():
        line = line.strip()
        if not line:
            continue
        pkg, _, lic = line.partition("|")
        pkg = pkg.removesuffix(" (*)")
        words = pkg.split(" ", 2)
        if len(words) < 2 or not words[1].startswith("v"):
            sys.exit("sbom: cannot read the cargo tree line %r" % line)
        name, version = words[0], words[1][1:]
        # A path (a workspace crate) stays out of the document: it differs between checkouts.
        source = "workspace" if len(words) == 3 and words[2].startswith("(/") else "crates.io"
        out.add((name, version, lic.removesuffix(" (*)").strip() or "NOASSERTION", source))
    if not any(n == "hypercloud" for n, _, _, _ in out):
        sys.exit("sbom: the cargo tree does not list hypercloud")
    return sorted(out)


def runtime_packages(spec):
    pkgs = []
    for item in spec.replace(",", " ").split():
        name, _, version = item.partition("=")
        if not name or not version:
            sys.exit("sbom: runtime package %r is not name=version" % item)
        pkgs.append((name, version))
    return sorted(pkgs)


def spdx_id(kind, name, version):
    safe = "".join(c if c.isalnum() or c in ".-" else "-" for c in "%s-%s" % (name, version))
    return "SPDXRef-%s-%s" % (kind, safe)


def document(tree, version, commit, created, digest, runtime):
    image_id = "SPDXRef-image"
    packages = [{
        "SPDXID": image_id,
        "name": "hypercloud",
        "versionInfo": "v" + version,
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "primaryPackagePurpose": "CONTAINER",
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest.split(":", 1)[-1]}],
        "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                          "referenceLocator": "pkg:oci/hypercloud@%s" % digest}],
        "comment": "git commit %s" % commit,
    }]
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_id}]
    for name, ver, lic, source in crates(tree):
        sid = spdx_id("crate", name, ver)
        packages.append({
            "SPDXID": sid, "name": name, "versionInfo": ver,
            "downloadLocation": "https://crates.io/crates/%s/%s" % (name, ver)
            if source == "crates.io" else "NOASSERTION",
            "filesAnalyzed": False, "licenseDeclared": lic, "primaryPackagePurpose": "LIBRARY",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": "pkg:cargo/%s@%s" % (name, ver)}],
        })
        relationships.append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                              "relatedSpdxElement": sid})
    for name, ver in runtime:
        sid = spdx_id("deb", name, ver)
        packages.append({
            "SPDXID": sid, "name": name, "versionInfo": ver, "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False, "primaryPackagePurpose": "OPERATING-SYSTEM",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": "pkg:deb/debian/%s@%s" % (name, ver)}],
        })
        relationships.append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                              "relatedSpdxElement": sid})
    namespace = hashlib.sha256(("%s %s" % (digest, commit)).encode()).hexdigest()[:32]
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "hypercloud-v%s" % version,
        "documentNamespace": "https://github.com/hypercloud/hypercloud/spdx/%s" % namespace,
        "creationInfo": {"created": created, "creators": ["Tool: hack/lib/sbom.py"]},
        "packages": packages,
        "relationships": relationships,
    }


def check(sbom, tree, version, digest, runtime):
    def fail(what):
        sys.exit("sbom: %s" % what)

    if sbom.get("spdxVersion") != "SPDX-2.3":
        fail("spdxVersion is %r, not SPDX-2.3" % sbom.get("spdxVersion"))
    pkgs = {p["SPDXID"]: p for p in sbom.get("packages", [])}
    image = pkgs.get("SPDXRef-image")
    if image is None:
        fail("no SPDXRef-image package")
    if image.get("versionInfo") != "v" + version:
        fail("the image package is version %r, the image v%s" % (image.get("versionInfo"), version))
    sums = [c.get("checksumValue") for c in image.get("checksums", [])]
    if digest.split(":", 1)[-1] not in sums:
        fail("the image package's checksum is not the image digest %s" % digest)
    contained = {r["relatedSpdxElement"] for r in sbom.get("relationships", [])
                 if r.get("spdxElementId") == "SPDXRef-image" and r.get("relationshipType") == "CONTAINS"}
    listed_crates = sorted((pkgs[s]["name"], pkgs[s]["versionInfo"]) for s in contained
                           if pkgs.get(s, {}).get("primaryPackagePurpose") == "LIBRARY")
    want_crates = sorted((n, v) for n, v, _, _ in crates(tree))
    for n, v in want_crates:
        if (n, v) not in listed_crates:
            fail("crate %s %s is linked but not listed" % (n, v))
    for n, v in listed_crates:
        if (n, v) not in want_crates:
            fail("crate %s %s is listed but not linked" % (n, v))
    listed_debs = sorted((pkgs[s]["name"], pkgs[s]["versionInfo"]) for s in contained
                         if pkgs.get(s, {}).get("primaryPackagePurpose") == "OPERATING-SYSTEM")
    if listed_debs != runtime:
        fail("runtime packages %s, the image has %s" % (listed_debs, runtime))
    print("sbom: ok: %d crates and %d runtime packages of hypercloud v%s (%s)"
          % (len(listed_crates), len(listed_debs), version, digest))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["write", "check"])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--version", required=True)
    ap.add_argument("--digest", required=True)
    ap.add_argument("--packages", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--created", default="1970-01-01T00:00:00Z")
    a = ap.parse_args(argv)
    runtime = runtime_packages(a.packages)
    if a.command == "write":
        with open(a.first) as f:
            tree = f.read()
        doc = document(tree, a.version, a.commit, a.created, a.digest, runtime)
        with open(a.second + ".tmp", "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")
        import os
        os.replace(a.second + ".tmp", a.second)
    else:
        with open(a.first) as f:
            sbom = json.load(f)
        with open(a.second) as f:
            tree = f.read()
        check(sbom, tree, a.version, a.digest, runtime)


if __name__ == "__main__":
    main(sys.argv[1:])
