#!/usr/bin/env python3
"""Tests for hack/sbom.py: python3 -m unittest discover -s hack -p 'test_*.py'

cargo cannot run where these tests were written, so CARGO_METADATA below is
written by hand in the shape `cargo metadata --format-version 1` prints
(cargo 1.77 and later: package ids like
"registry+https://github.com/rust-lang/crates.io-index#serde@1.0.228"; a
resolve graph whose nodes list `deps` with `dep_kinds`, `kind` null for a
normal dependency, "build" or "dev"). Fields sbom.py does not read (targets,
features, manifest_path, ...) are kept, shortened, so the sample stays
recognisable next to real output. The crates and edges are chosen to cover
each rule: a normal edge, a build-only edge (cc under ring), an edge that is
both (normal wins), a dev-dependency (tempfile: left out with what only it
pulls in), the old 'A/B' license form, a git source without a license, and
Cargo.lock checksums.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbom  # noqa: E402

CRATES = "registry+https://github.com/rust-lang/crates.io-index"
GIT = "git+https://github.com/example/gitdep?branch=main#0123456789abcdef0123456789abcdef01234567"
ROOT = "path+file:///src/winpool#winpool@0.2.0"


def cid(name: str, version: str, source: str = CRATES) -> str:
    return f"{source}#{name}@{version}"


def pkg(name, version, license_, source=CRATES, description=None, kind=("lib",)):
    return {
        "name": name,
        "version": version,
        "id": ROOT if source is None else cid(name, version, source),
        "license": license_,
        "license_file": None if license_ else "LICENSE",
        "description": description,
        "source": source,
        "dependencies": [],  # declared dependencies; sbom.py reads the resolve graph
        "targets": [{"kind": list(kind), "crate_types": list(kind), "name": name, "src_path": "src/lib.rs"}],
        "features": {},
        "manifest_path": f"/home/u/.cargo/registry/src/{name}-{version}/Cargo.toml",
        "metadata": None,
        "publish": None,
        "authors": [],
        "categories": [],
        "keywords": [],
        "readme": None,
        "repository": None,
        "homepage": None,
        "documentation": None,
        "edition": "2021",
        "links": None,
        "default_run": None,
        "rust_version": None,
    }


def dep(name, pid, *kinds):
    return {"name": name, "pkg": pid, "dep_kinds": [{"kind": k, "target": None} for k in (kinds or (None,))]}


def node(pid, *deps):
    return {"id": pid, "dependencies": [d["pkg"] for d in deps], "deps": list(deps), "features": []}


SERDE, DERIVE = cid("serde", "1.0.228"), cid("serde_derive", "1.0.228")
RING, CC = cid("ring", "0.17.14"), cid("cc", "1.2.41")
MEMCHR, TEMPFILE, FASTRAND = cid("memchr", "2.5.0"), cid("tempfile", "3.23.0"), cid("fastrand", "2.3.0")
SHLEX, GITDEP = cid("shlex", "1.3.0"), cid("gitdep", "0.1.0", GIT)

CARGO_METADATA = {
    "packages": [
        {**pkg("winpool", "0.2.0", "Apache-2.0", source=None, description="Kubernetes operator", kind=("lib",)),
         "manifest_path": "/src/winpool/Cargo.toml"},
        pkg("serde", "1.0.228", "MIT OR Apache-2.0", description="A generic serialization/deserialization\nframework"),
        pkg("serde_derive", "1.0.228", "MIT OR Apache-2.0", kind=("proc-macro",)),
        pkg("ring", "0.17.14", "Apache-2.0 AND ISC"),
        pkg("cc", "1.2.41", "MIT OR Apache-2.0"),
        pkg("shlex", "1.3.0", "MIT OR Apache-2.0"),
        pkg("memchr", "2.5.0", "Unlicense/MIT"),
        pkg("tempfile", "3.23.0", "MIT OR Apache-2.0"),
        pkg("fastrand", "2.3.0", "Apache-2.0 OR MIT"),
        pkg("gitdep", "0.1.0", None, source=GIT),
    ],
    "workspace_members": [ROOT],
    "workspace_default_members": [ROOT],
    "resolve": {
        "nodes": [
            node(ROOT, dep("serde", SERDE), dep("ring", RING), dep("memchr", MEMCHR), dep("gitdep", GITDEP),
                 dep("tempfile", TEMPFILE, "dev"), dep("shlex", SHLEX, None, "build")),
            node(SERDE, dep("serde_derive", DERIVE)),
            node(DERIVE),
            node(RING, dep("cc", CC, "build")),
            node(CC, dep("shlex", SHLEX)),
            node(SHLEX),
            node(MEMCHR),
            node(TEMPFILE, dep("fastrand", FASTRAND)),
            node(FASTRAND),
            node(GITDEP),
        ],
        "root": ROOT,
    },
    "target_directory": "/src/winpool/target",
    "version": 1,
    "workspace_root": "/src/winpool",
    "metadata": None,
}

CARGO_LOCK = """\
version = 4

[[package]]
name = "serde"
version = "1.0.228"
source = "registry+https://github.com/rust-lang/crates.io-index"
checksum = "9a8e94ea7f378bd32cbbd37198a4a91436180c5bb472411e48b5ec2e2124ae9e"

[[package]]
name = "winpool"
version = "0.2.0"
"""

# `go list -m -json all` in a module: one object per module, the main one first.
GO_MODULES = """\
{
	"Path": "winpool.dev/agent",
	"Main": true,
	"Dir": "/src/winpool/agent",
	"GoMod": "/src/winpool/agent/go.mod",
	"GoVersion": "1.26.8"
}
{
	"Path": "github.com/Microsoft/go-winio",
	"Version": "v0.6.4",
	"Time": "2025-01-01T00:00:00Z",
	"Dir": "/home/u/go/pkg/mod/github.com/!microsoft/go-winio@v0.6.4",
	"GoMod": "/home/u/go/pkg/mod/cache/download/github.com/!microsoft/go-winio/@v/v0.6.4.mod",
	"GoVersion": "1.22"
}
{
	"Path": "github.com/pmezard/go-difflib",
	"Version": "v1.0.1-0.20181226105442-5d4384ee4fb2",
	"Indirect": true
}
{
	"Path": "example.com/old",
	"Version": "v1.0.0",
	"Replace": {"Path": "example.com/fork", "Version": "v1.0.1"}
}
"""

# `go version -m winpool-agent.exe`: go-difflib (a test dependency) is not linked.
GO_BUILDINFO = (
    "winpool-agent.exe: go1.26.8\n"
    "\tpath\twinpool.dev/agent/cmd/winpool-agent\n"
    "\tmod\twinpool.dev/agent\t(devel)\t\n"
    "\tdep\tgithub.com/Microsoft/go-winio\tv0.6.4\th1:abc=\n"
    "\tdep\texample.com/old\tv1.0.0\n"
    "\t=>\texample.com/fork\tv1.0.1\th1:def=\n"
    "\tbuild\t-buildmode=exe\n"
    "\tbuild\tGOOS=windows\n"
)

CHART_YAML = """\
apiVersion: v2
name: winpool
version: 0.2.0
appVersion: "0.2.0"
annotations:
  artifacthub.io/license: Apache-2.0
  artifacthub.io/images: |
    - name: winpool
      image: ghcr.io/winpool/winpool:0.2.0
      platforms: [linux/amd64]
    - name: winpool-agent
      image: ghcr.io/winpool/agent:0.2.0
      platforms: [windows/amd64]
"""

SPDX_ID = re.compile(r"^SPDXRef-[A-Za-z0-9.-]+$")


def check_spdx(t: unittest.TestCase, doc: dict) -> None:
    """The SPDX 2.3 fields every document and package must have, unique
    identifiers, and relationships between elements that exist."""
    for key, want in [("spdxVersion", "SPDX-2.3"), ("dataLicense", "CC0-1.0"), ("SPDXID", "SPDXRef-DOCUMENT")]:
        t.assertEqual(doc[key], want)
    t.assertTrue(doc["name"])
    t.assertRegex(doc["documentNamespace"], r"^https://[^#]+$")
    t.assertRegex(doc["creationInfo"]["created"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
    t.assertTrue(doc["creationInfo"]["creators"])
    ids = {"SPDXRef-DOCUMENT"}
    for p in doc["packages"]:
        t.assertRegex(p["SPDXID"], SPDX_ID)
        t.assertNotIn(p["SPDXID"], ids, "SPDXID used twice")
        ids.add(p["SPDXID"])
        for key in ["name", "downloadLocation", "licenseConcluded", "licenseDeclared", "copyrightText"]:
            t.assertTrue(p.get(key), f"{p['SPDXID']} has no {key}")
        t.assertIs(p["filesAnalyzed"], False)
        for ref in p.get("externalRefs", []):
            t.assertEqual(ref["referenceType"], "purl")
            t.assertRegex(ref["referenceLocator"], r"^pkg:[a-z]+/")
    for r in doc["relationships"]:
        t.assertIn(r["spdxElementId"], ids)
        t.assertIn(r["relatedSpdxElement"], ids)
    t.assertIn({"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": "SPDXRef-Artifact"},
               doc["relationships"])


def purl(p: dict) -> str | None:
    refs = p.get("externalRefs") or []
    return refs[0]["referenceLocator"] if refs else None


class SbomTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        os.environ["SOURCE_DATE_EPOCH"] = "1764000000"

    def file(self, name: str, data: bytes) -> str:
        path = os.path.join(self.dir.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def run_sbom(self, *args: str) -> dict:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(sbom.main(list(args)), 0)
        doc = json.loads(out.getvalue())
        check_spdx(self, doc)
        return doc

    def relations(self, doc: dict) -> set[tuple[str, str, str]]:
        names = {p["SPDXID"]: p["name"] for p in doc["packages"]}
        names["SPDXRef-DOCUMENT"] = "DOCUMENT"
        return {(names[r["spdxElementId"]], r["relationshipType"], names[r["relatedSpdxElement"]]) for r in doc["relationships"]}

    def test_cargo(self):
        art = self.file("kubectl-winpool_0.2.0_linux_amd64.tar.gz", b"archive")
        meta = self.file("metadata.json", json.dumps(CARGO_METADATA).encode())
        lock = self.file("Cargo.lock", CARGO_LOCK.encode())
        doc = self.run_sbom("cargo", "--artifact", art, "--version", "0.2.0", "--metadata", meta, "--lockfile", lock)
        by_name = {p["name"]: p for p in doc["packages"]}

        self.assertEqual(set(by_name), {"kubectl-winpool_0.2.0_linux_amd64.tar.gz", "winpool", "serde", "serde_derive",
                                        "ring", "cc", "shlex", "memchr", "gitdep"},
                         "tempfile and fastrand (dev only) are not in the artifact")
        self.assertEqual(self.relations(doc), {
            ("DOCUMENT", "DESCRIBES", "kubectl-winpool_0.2.0_linux_amd64.tar.gz"),
            ("kubectl-winpool_0.2.0_linux_amd64.tar.gz", "CONTAINS", "winpool"),
            ("winpool", "DEPENDS_ON", "serde"),
            ("winpool", "DEPENDS_ON", "ring"),
            ("winpool", "DEPENDS_ON", "memchr"),
            ("winpool", "DEPENDS_ON", "gitdep"),
            ("winpool", "DEPENDS_ON", "shlex"),  # normal and build: normal wins
            ("serde", "DEPENDS_ON", "serde_derive"),
            ("cc", "BUILD_DEPENDENCY_OF", "ring"),
            ("cc", "DEPENDS_ON", "shlex"),
        })
        art_pkg = by_name["kubectl-winpool_0.2.0_linux_amd64.tar.gz"]
        self.assertEqual(art_pkg["checksums"], [{"algorithm": "SHA256", "checksumValue": hashlib.sha256(b"archive").hexdigest()}])
        self.assertEqual(art_pkg["primaryPackagePurpose"], "ARCHIVE")
        self.assertEqual(art_pkg["downloadLocation"],
                         "https://github.com/winpool/winpool/releases/download/v0.2.0/kubectl-winpool_0.2.0_linux_amd64.tar.gz")
        self.assertEqual(purl(by_name["serde"]), "pkg:cargo/serde@1.0.228")
        self.assertEqual(by_name["serde"]["licenseDeclared"], "MIT OR Apache-2.0")
        self.assertEqual(by_name["serde"]["checksums"][0]["checksumValue"],
                         "9a8e94ea7f378bd32cbbd37198a4a91436180c5bb472411e48b5ec2e2124ae9e")
        self.assertEqual(by_name["serde"]["downloadLocation"], "https://crates.io/api/v1/crates/serde/1.0.228/download")
        self.assertEqual(by_name["serde"]["summary"], "A generic serialization/deserialization framework")
        self.assertEqual(by_name["ring"]["licenseDeclared"], "Apache-2.0 AND ISC")
        self.assertEqual(by_name["memchr"]["licenseDeclared"], "Unlicense OR MIT")
        self.assertEqual(by_name["gitdep"]["licenseDeclared"], "NOASSERTION")
        self.assertEqual(purl(by_name["gitdep"]),
                         "pkg:cargo/gitdep@0.1.0?vcs_url=git+https://github.com/example/gitdep@0123456789abcdef0123456789abcdef01234567")
        self.assertEqual(by_name["winpool"]["licenseDeclared"], "Apache-2.0")
        self.assertNotIn("checksums", by_name["winpool"])
        self.assertEqual(doc["creationInfo"]["created"], "2025-11-24T16:00:00Z")

        again = self.run_sbom("cargo", "--artifact", art, "--version", "0.2.0", "--metadata", meta, "--lockfile", lock)
        self.assertEqual(doc, again, "the same inputs give the same document")

    def test_cargo_without_resolve(self):
        meta = self.file("metadata.json", json.dumps({**CARGO_METADATA, "resolve": None}).encode())
        art = self.file("a.tar.gz", b"x")
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
            sbom.main(["cargo", "--artifact", art, "--version", "0.2.0", "--metadata", meta])
        self.assertIn("--no-deps", str(e.exception))

    def oci_archive(self, name: str, digest: str) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            index = json.dumps({"schemaVersion": 2, "manifests": [{"digest": digest, "size": 1}]}).encode()
            info = tarfile.TarInfo("index.json")
            info.size = len(index)
            tf.addfile(info, io.BytesIO(index))
        return self.file(name, buf.getvalue())

    def test_go(self):
        digest = "sha256:" + "ab" * 32
        art = self.oci_archive("winpool-agent-0.2.0.oci.tar", digest)
        mods = self.file("modules.json", GO_MODULES.encode())
        info = self.file("buildinfo.txt", GO_BUILDINFO.encode())
        doc = self.run_sbom("go", "--artifact", art, "--version", "0.2.0", "--modules", mods, "--buildinfo", info,
                            "--image-ref", "ghcr.io/winpool/agent:0.2.0")
        by_name = {p["name"]: p for p in doc["packages"]}
        self.assertEqual(set(by_name), {"winpool-agent-0.2.0.oci.tar", "winpool.dev/agent", "stdlib",
                                        "github.com/Microsoft/go-winio", "example.com/fork"},
                         "go-difflib is not linked into the executable")
        self.assertEqual(purl(by_name["winpool-agent-0.2.0.oci.tar"]),
                         "pkg:oci/agent@sha256%3A" + "ab" * 32 + "?repository_url=ghcr.io/winpool/agent&tag=0.2.0")
        self.assertEqual(by_name["winpool-agent-0.2.0.oci.tar"]["primaryPackagePurpose"], "CONTAINER")
        self.assertEqual(purl(by_name["github.com/Microsoft/go-winio"]), "pkg:golang/github.com/microsoft/go-winio@v0.6.4")
        self.assertEqual(purl(by_name["stdlib"]), "pkg:golang/stdlib@go1.26.8")
        self.assertEqual(purl(by_name["winpool.dev/agent"]), "pkg:golang/winpool.dev/agent@v0.2.0")
        self.assertEqual(by_name["example.com/fork"]["comment"], "replaces example.com/old v1.0.0")
        self.assertEqual(self.relations(doc), {
            ("DOCUMENT", "DESCRIBES", "winpool-agent-0.2.0.oci.tar"),
            ("winpool-agent-0.2.0.oci.tar", "CONTAINS", "winpool.dev/agent"),
            ("winpool.dev/agent", "DEPENDS_ON", "stdlib"),
            ("winpool.dev/agent", "DEPENDS_ON", "github.com/Microsoft/go-winio"),
            ("winpool.dev/agent", "DEPENDS_ON", "example.com/fork"),
        })

        # Without the executable's build info every module of the graph is listed.
        doc = self.run_sbom("go", "--artifact", art, "--version", "0.2.0", "--modules", mods)
        self.assertIn("github.com/pmezard/go-difflib", {p["name"] for p in doc["packages"]})

    def chart(self, yaml: str) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            data = yaml.encode()
            info = tarfile.TarInfo("winpool/Chart.yaml")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        return self.file("winpool-0.2.0.tgz", buf.getvalue())

    def test_chart(self):
        doc = self.run_sbom("chart", "--artifact", self.chart(CHART_YAML), "--version", "0.2.0")
        by_name = {p["name"]: p for p in doc["packages"]}
        self.assertEqual(purl(by_name["ghcr.io/winpool/agent"]), "pkg:oci/agent?repository_url=ghcr.io/winpool/agent&tag=0.2.0")
        self.assertEqual(by_name["ghcr.io/winpool/winpool"]["versionInfo"], "0.2.0")
        self.assertEqual(self.relations(doc), {
            ("DOCUMENT", "DESCRIBES", "winpool-0.2.0.tgz"),
            ("winpool-0.2.0.tgz", "DEPENDS_ON", "ghcr.io/winpool/winpool"),
            ("winpool-0.2.0.tgz", "DEPENDS_ON", "ghcr.io/winpool/agent"),
        })

    def test_chart_of_another_version(self):
        art = self.chart(CHART_YAML.replace("version: 0.2.0", "version: 0.1.0"))
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stdout(io.StringIO()):
            sbom.main(["chart", "--artifact", art, "--version", "0.2.0"])
        self.assertIn("chart version 0.1.0", str(e.exception))


if __name__ == "__main__":
    unittest.main()
