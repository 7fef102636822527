#!/usr/bin/env python3
"""Reads an OCI image archive back and checks what a release promises of it.

    hack/oci_check.py ARCHIVE --platform OS/ARCH --entrypoint PATH [--user UID:GID] [--file PATH]...

index.json -> its one manifest -> config and layers: every blob's digest and
size as the references say, the config's diff_ids those of the layers, the
platform, the entrypoint and the user the image runs as, and (--file) paths
that must be in some layer. hack/release.sh runs it on the operator's image;
the agent's Windows image has its own, stricter check (hack/tools/winimage).
Prints "oci-check: ok ..." and exits 0, or one line per problem and exits 1.
"""

import argparse
import gzip
import hashlib
import io
import json
import sys
import tarfile


def blob(tar, digest):
    algo, _, hexd = digest.partition(":")
    member = tar.extractfile(f"blobs/{algo}/{hexd}")
    if member is None:
        raise KeyError(digest)
    return member.read()


def check(path, platform, entrypoint, user=None, files=()):
    problems = []
    with tarfile.open(path) as tar:
        index = json.loads(tar.extractfile("index.json").read())
        manifests = index.get("manifests", [])
        if len(manifests) != 1:
            return [f"index.json lists {len(manifests)} manifests, want 1"]
        ref = manifests[0]

        def read(desc, what):
            try:
                data = blob(tar, desc["digest"])
            except KeyError:
                problems.append(f"{what} {desc['digest']} is not in the archive")
                return None
            got = "sha256:" + hashlib.sha256(data).hexdigest()
            if got != desc["digest"] or len(data) != desc["size"]:
                # What does not match its reference is not read any further.
                problems.append(f"{what}: digest {got} size {len(data)}, the reference says {desc['digest']} size {desc['size']}")
                return None
            return data

        manifest = read(ref, "manifest")
        if manifest is None:
            return problems
        manifest = json.loads(manifest)
        config = read(manifest["config"], "config")
        if config is None:
            return problems
        config = json.loads(config)
        got_platform = f"{config.get('os')}/{config.get('architecture')}"
        if got_platform != platform:
            problems.append(f"platform {got_platform}, want {platform}")
        runs = config.get("config", {})
        if runs.get("Entrypoint") != [entrypoint]:
            problems.append(f"entrypoint {runs.get('Entrypoint')}, want [{entrypoint!r}]")
        if user is not None and runs.get("User") != user:
            problems.append(f"user {runs.get('User')!r}, want {user!r}")
        diff_ids, names = [], set()
        for i, layer in enumerate(manifest.get("layers", [])):
            data = read(layer, f"layer {i}")
            if data is None:
                continue
            try:
                plain = gzip.decompress(data) if layer["mediaType"].endswith("+gzip") else data
                with tarfile.open(fileobj=io.BytesIO(plain)) as lt:
                    names.update(n.lstrip("./").rstrip("/") for n in lt.getnames())
            except (OSError, EOFError, tarfile.TarError) as e:
                problems.append(f"layer {i} is not a readable tar: {e}")
                continue
            diff_ids.append("sha256:" + hashlib.sha256(plain).hexdigest())
        if diff_ids != config.get("rootfs", {}).get("diff_ids"):
            problems.append(f"config diff_ids {config.get('rootfs', {}).get('diff_ids')} are not the layers' {diff_ids}")
        for f in files:
            if f.lstrip("/") not in names:
                problems.append(f"{f} is in no layer")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("--platform", required=True)
    ap.add_argument("--entrypoint", required=True)
    ap.add_argument("--user")
    ap.add_argument("--file", action="append", default=[])
    a = ap.parse_args()
    problems = check(a.archive, a.platform, a.entrypoint, a.user, a.file)
    for p in problems:
        print(f"oci-check: {a.archive}: {p}")
    if problems:
        return 1
    print(f"oci-check: ok {a.archive} ({a.platform}, entrypoint {a.entrypoint}, user {a.user})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
