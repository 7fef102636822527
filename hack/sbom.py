#!/usr/bin/env python3
"""SPDX 2.3 JSON SBOMs for winpool's release artifacts (hack/release.sh).

  hack/sbom.py cargo --artifact FILE --version V --metadata JSON [--lockfile Cargo.lock] [--image-ref REF]
  hack/sbom.py go    --artifact FILE --version V --modules JSON [--buildinfo TXT] [--image-ref REF]
  hack/sbom.py chart --artifact FILE --version V

cargo: the operator image and the kubectl plugin, from `cargo metadata
  --format-version 1 --locked --filter-platform TRIPLE` (the resolve graph,
  so the SBOM holds what the target links and its real dependency edges; dev
  dependencies left out). Licenses come from each crate's `license`; SHA-256
  sums from Cargo.lock when given.
go: the agent image, from `go list -m -json all` in agent/, narrowed to the
  modules linked into the executable when `go version -m` output is given
  (`go list -m all` also lists test-only and other-platform modules), plus the
  Go standard library the executable was built with.
chart: the Helm chart package, from the images its Chart.yaml lists
  (artifacthub.io/images, which tests/release.rs ties to the crate version).

An argument of '-' reads standard input. The document's time is
$SOURCE_DATE_EPOCH when set, so a rebuild gives the same file. Python 3.11
standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import tarfile
import tomllib
import urllib.parse

PROJECT_URL = "https://github.com/winpool/winpool"
PROJECT_LICENSE = "Apache-2.0"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"


def read_arg(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as f:
        return f.read()


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spdx_id(*parts: str) -> str:
    # SPDX identifiers allow letters, digits, '.' and '-' only.
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]+", "-", "-".join(parts)).strip("-")


def spdx_license(expr: str | None) -> str:
    """A cargo `license` as an SPDX expression: Cargo still accepts the old
    'MIT/Apache-2.0' form, which means MIT OR Apache-2.0."""
    if not expr:
        return "NOASSERTION"
    return " OR ".join(p.strip() for p in expr.split("/")) if "/" in expr else expr


class Document:
    def __init__(self, artifact: str, version: str, purpose: str, image_ref: str | None):
        self.artifact = artifact
        self.name = os.path.basename(artifact)
        self.version = version
        self.packages: list[dict] = []
        self.relationships: list[dict] = []
        self.ids: set[str] = set()
        digest = sha256_file(artifact)
        self.digest = digest
        art = self.add_package(
            "SPDXRef-Artifact",
            name=self.name,
            version=version,
            download=f"{PROJECT_URL}/releases/download/v{version}/{self.name}",
            license_declared=PROJECT_LICENSE,
            purl=oci_purl(artifact, image_ref) if image_ref else None,
        )
        art["packageFileName"] = self.name
        art["checksums"] = [{"algorithm": "SHA256", "checksumValue": digest}]
        art["primaryPackagePurpose"] = purpose
        art["supplier"] = "Organization: winpool"
        self.relate("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Artifact")

    def unique_id(self, wanted: str) -> str:
        sid, n = wanted, 1
        while sid in self.ids:
            n += 1
            sid = f"{wanted}-{n}"
        self.ids.add(sid)
        return sid

    def add_package(self, sid: str, *, name: str, version: str | None, download: str = "NOASSERTION",
                    license_declared: str = "NOASSERTION", purl: str | None = None,
                    sha256: str | None = None, comment: str | None = None) -> dict:
        pkg = {
            "SPDXID": self.unique_id(sid),
            "name": name,
            "downloadLocation": download,
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": license_declared,
            "copyrightText": "NOASSERTION",
        }
        if version:
            pkg["versionInfo"] = version
        if purl:
            pkg["externalRefs"] = [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}]
        if sha256:
            pkg["checksums"] = [{"algorithm": "SHA256", "checksumValue": sha256}]
        if comment:
            pkg["comment"] = comment
        self.packages.append(pkg)
        return pkg

    def relate(self, a: str, kind: str, b: str) -> None:
        self.relationships.append({"spdxElementId": a, "relationshipType": kind, "relatedSpdxElement": b})

    def to_json(self) -> dict:
        epoch = os.environ.get("SOURCE_DATE_EPOCH")
        when = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC) if epoch else datetime.datetime.now(datetime.UTC)
        return {
            "spdxVersion": "SPDX-2.3",
            "dataLicense": "CC0-1.0",
            "SPDXID": "SPDXRef-DOCUMENT",
            "name": self.name,
            # Unique per artifact content, as SPDX asks of a namespace.
            "documentNamespace": f"{PROJECT_URL}/spdx/{self.name}-{self.digest}",
            "creationInfo": {
                "created": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "creators": ["Organization: winpool", "Tool: hack/sbom.py"],
            },
            "packages": self.packages,
            "relationships": self.relationships,
        }


def oci_purl(archive: str, image_ref: str) -> str:
    """pkg:oci for the image in an OCI layout archive: its manifest (or
    index) digest, which a registry keeps when the archive is pushed as is."""
    with tarfile.open(archive) as tf:
        member = tf.extractfile("index.json")
        if member is None:
            raise SystemExit(f"{archive}: no index.json")
        index = json.load(member)
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise SystemExit(f"{archive}: {len(manifests)} manifests in index.json, want 1")
    repo, _, tag = image_ref.rpartition(":")
    if not repo or "/" in tag:
        raise SystemExit(f"--image-ref {image_ref}: want repository:tag")
    digest = urllib.parse.quote(manifests[0]["digest"], safe="")
    name = repo.rsplit("/", 1)[-1].lower()
    return f"pkg:oci/{name}@{digest}?repository_url={repo}&tag={tag}"


# ---- cargo --------------------------------------------------------------------


def cargo_purl(pkg: dict) -> str:
    purl = f"pkg:cargo/{pkg['name']}@{pkg['version']}"
    source = pkg.get("source")
    if source and source != CRATES_IO:
        if source.startswith("git+"):
            url, _, rev = source[4:].partition("#")
            purl += "?vcs_url=" + urllib.parse.quote(f"git+{url.split('?')[0]}@{rev}", safe="/:@+")
        elif source.startswith(("registry+", "sparse+")):
            purl += "?repository_url=" + urllib.parse.quote(source.split("+", 1)[1], safe="/:")
    return purl


def cargo_download(pkg: dict) -> str:
    source = pkg.get("source")
    if source == CRATES_IO:
        return f"https://crates.io/api/v1/crates/{pkg['name']}/{pkg['version']}/download"
    if source and source.startswith("git+"):
        return source
    return "NOASSERTION"


def lock_checksums(lock_text: str | None) -> dict[tuple[str, str], str]:
    if not lock_text:
        return {}
    lock = tomllib.loads(lock_text)
    return {(p["name"], p["version"]): p["checksum"] for p in lock.get("package", []) if "checksum" in p}


def cargo_sbom(doc: Document, metadata: dict, lock_text: str | None) -> None:
    packages = {p["id"]: p for p in metadata["packages"]}
    resolve = metadata.get("resolve")
    if not resolve or not resolve.get("nodes"):
        raise SystemExit("cargo metadata has no resolve graph (was it run with --no-deps?)")
    nodes = {n["id"]: n for n in resolve["nodes"]}
    root = resolve.get("root")
    if root is None:
        members = metadata.get("workspace_members") or []
        if len(members) != 1:
            raise SystemExit("cargo metadata: no resolve.root and not one workspace member")
        root = members[0]
    checksums = lock_checksums(lock_text)

    ids: dict[str, str] = {}

    def package_id(pid: str) -> str:
        if pid not in ids:
            p = packages[pid]
            pkg = doc.add_package(
                spdx_id("Package-cargo", p["name"], p["version"]),
                name=p["name"],
                version=p["version"],
                download=cargo_download(p),
                license_declared=spdx_license(p.get("license")),
                purl=cargo_purl(p),
                sha256=checksums.get((p["name"], p["version"])) if p.get("source") else None,
            )
            if p.get("description"):
                pkg["summary"] = " ".join(p["description"].split())
            ids[pid] = pkg["SPDXID"]
        return ids[pid]

    doc.relate("SPDXRef-Artifact", "CONTAINS", package_id(root))
    seen, queue = {root}, [root]
    while queue:
        pid = queue.pop(0)
        for dep in sorted(nodes[pid].get("deps", []), key=lambda d: d["pkg"]):
            kinds = {k.get("kind") for k in dep.get("dep_kinds", [{"kind": None}])}
            # Dev-dependencies build only the tests and examples.
            if kinds <= {"dev"}:
                continue
            if None in kinds:
                doc.relate(package_id(pid), "DEPENDS_ON", package_id(dep["pkg"]))
            else:
                doc.relate(package_id(dep["pkg"]), "BUILD_DEPENDENCY_OF", package_id(pid))
            if dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                queue.append(dep["pkg"])


# ---- go -----------------------------------------------------------------------


def json_stream(text: str) -> list[dict]:
    """`go list -m -json` prints one JSON object after another."""
    dec, objs, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return objs
        obj, i = dec.raw_decode(text, i)
        objs.append(obj)


def parse_buildinfo(text: str) -> tuple[str | None, dict[str, str]]:
    """`go version -m`: the Go version and the linked modules (path ->
    version), a replacement's path and version standing for what it
    replaces."""
    go_version, deps, last = None, {}, None
    for line in text.splitlines():
        fields = line.strip().split("\t")
        if go_version is None and ": go" in line and not line.startswith("\t"):
            go_version = line.rsplit(": ", 1)[1].strip()
        elif fields[0] == "dep" and len(fields) >= 3:
            last = fields[1]
            deps[last] = fields[2]
        elif fields[0] == "=>" and last and len(fields) >= 3:
            deps[last] = f"{fields[1]} {fields[2]}"
    return go_version, deps


def go_purl(path: str, version: str | None) -> str:
    # purl's golang type lowercases namespace and name.
    purl = "pkg:golang/" + "/".join(urllib.parse.quote(p, safe="") for p in path.lower().split("/"))
    return purl + (f"@{version}" if version else "")


def go_sbom(doc: Document, modules: list[dict], buildinfo: str | None) -> None:
    main = [m for m in modules if m.get("Main")]
    if len(main) != 1:
        raise SystemExit(f"go list -m: {len(main)} main modules, want 1")
    main = main[0]
    linked = None
    go_version = None
    if buildinfo is not None:
        go_version, linked = parse_buildinfo(buildinfo)
        if not linked:
            raise SystemExit("go version -m lists no dependencies")
    root = doc.add_package(
        spdx_id("Package-golang", main["Path"]),
        name=main["Path"],
        version=doc.version,
        download=PROJECT_URL,
        license_declared=PROJECT_LICENSE,
        purl=go_purl(main["Path"], "v" + doc.version),
    )
    doc.relate("SPDXRef-Artifact", "CONTAINS", root["SPDXID"])
    if go_version:
        std = doc.add_package(spdx_id("Package-golang-stdlib", go_version), name="stdlib", version=go_version,
                              download="https://go.dev/dl/", license_declared="BSD-3-Clause",
                              purl=f"pkg:golang/stdlib@{go_version}")
        doc.relate(root["SPDXID"], "DEPENDS_ON", std["SPDXID"])
    by_path = {m["Path"]: m for m in modules if not m.get("Main")}
    if linked is not None:
        missing = sorted(set(linked) - set(by_path))
        if missing:
            raise SystemExit(f"linked but not in go list -m all (another go.mod?): {', '.join(missing)}")
        paths = sorted(linked)
    else:
        paths = sorted(by_path)
    for path in paths:
        m = by_path[path]
        rep = m.get("Replace")
        version = (rep or m).get("Version") or m.get("Version")
        source = rep["Path"] if rep else path
        pkg = doc.add_package(spdx_id("Package-golang", source, version or ""), name=source, version=version,
                              download=f"https://proxy.golang.org/{source.lower()}/@v/{version}.zip" if version else "NOASSERTION",
                              purl=go_purl(source, version),
                              comment=f"replaces {path} {m.get('Version')}" if rep else None)
        doc.relate(root["SPDXID"], "DEPENDS_ON", pkg["SPDXID"])


# ---- chart --------------------------------------------------------------------


def chart_sbom(doc: Document) -> None:
    with tarfile.open(doc.artifact) as tf:
        charts = [m for m in tf.getmembers() if re.fullmatch(r"[^/]+/Chart\.yaml", m.name)]
        if len(charts) != 1:
            raise SystemExit(f"{doc.artifact}: {len(charts)} top-level Chart.yaml")
        text = tf.extractfile(charts[0]).read().decode()
    def field(key: str) -> str | None:
        m = re.search(rf'^{key}:\s*"?([^"\n]+?)"?\s*$', text, re.M)
        return m[1] if m else None

    name, version = field("name"), field("version")
    if version != doc.version:
        raise SystemExit(f"{doc.artifact}: chart version {version}, want {doc.version}")
    license_ = re.search(r"^\s+artifacthub\.io/license:\s*(\S+)", text, re.M)
    doc.packages[0]["licenseDeclared"] = license_[1] if license_ else PROJECT_LICENSE
    doc.packages[0]["summary"] = f"Helm chart {name} {version}"
    # The artifacthub.io/images block: '- name: x' / 'image: repo:tag' pairs.
    images = re.findall(r"^\s+(?:- )?image:\s*(\S+)\s*$", text, re.M)
    if not images:
        raise SystemExit(f"{doc.artifact}: Chart.yaml lists no images (artifacthub.io/images)")
    for ref in images:
        repo, _, tag = ref.rpartition(":")
        name = repo.rsplit("/", 1)[-1].lower()
        pkg = doc.add_package(spdx_id("Package-oci", repo, tag), name=repo, version=tag,
                              download=f"https://{repo}", license_declared=PROJECT_LICENSE,
                              # The chart names tags, not digests, so no
                              # digest (a purl's oci version) to give.
                              purl=f"pkg:oci/{name}?repository_url={repo}&tag={tag}")
        doc.relate("SPDXRef-Artifact", "DEPENDS_ON", pkg["SPDXID"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["cargo", "go", "chart"])
    ap.add_argument("--artifact", required=True, help="the released file the SBOM describes")
    ap.add_argument("--version", required=True, help="the release version, without v")
    ap.add_argument("--metadata", help="cargo metadata JSON (cargo)")
    ap.add_argument("--lockfile", help="Cargo.lock, for the crates' SHA-256 (cargo)")
    ap.add_argument("--modules", help="go list -m -json all output (go)")
    ap.add_argument("--buildinfo", help="go version -m output of the executable (go)")
    ap.add_argument("--image-ref", help="repository:tag of an OCI archive artifact, for its purl")
    ap.add_argument("--out", help="write here instead of standard output")
    a = ap.parse_args(argv)

    purpose = "CONTAINER" if a.artifact.endswith(".oci.tar") else "ARCHIVE" if a.kind != "chart" else "INSTALL"
    doc = Document(a.artifact, a.version, purpose, a.image_ref)
    if a.kind == "cargo":
        if not a.metadata:
            ap.error("cargo needs --metadata")
        cargo_sbom(doc, json.loads(read_arg(a.metadata)), read_arg(a.lockfile) if a.lockfile else None)
    elif a.kind == "go":
        if not a.modules:
            ap.error("go needs --modules")
        go_sbom(doc, json_stream(read_arg(a.modules)), read_arg(a.buildinfo) if a.buildinfo else None)
    else:
        chart_sbom(doc)

    out = json.dumps(doc.to_json(), indent=2, sort_keys=False) + "\n"
    if a.out:
        with open(a.out + ".tmp", "w", encoding="utf-8") as f:
            f.write(out)
        os.replace(a.out + ".tmp", a.out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
