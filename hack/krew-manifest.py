#!/usr/bin/env python3
"""The krew plugin manifest (winpool.yaml, for krew-index's plugins/) for the
plugin archives of a release.

  hack/krew-manifest.py VERSION DIST_DIR > DIST_DIR/winpool.yaml

One platform per DIST_DIR/kubectl-winpool_VERSION_OS_ARCH.tar.gz, with the
GitHub release asset's URL and the archive's SHA-256. Follows krew's
validation (sigs.k8s.io/krew internal/index/validation/validate.go): the
file is named after metadata.name, apiVersion v1alpha2, a one-line
shortDescription, a v-prefixed semver version, and per platform a uri, a
lowercase sha256, a bin and an os/arch selector; matchLabels with both keys
so no two platforms overlap (cmd/validate-krew-manifest checks that). No
`files:` list: the archive holds only the binary and LICENSE, and krew
extracts everything by default (krew's plugin-manifest guide recommends
leaving it out then). Python 3.11 standard library only.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys

REPO_URL = "https://github.com/winpool/winpool"
GOOS = {"linux", "darwin", "windows"}
GOARCH = {"amd64", "arm64"}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.exit(__doc__)
    version, dist = argv[0].removeprefix("v"), argv[1]
    pattern = re.compile(rf"^kubectl-winpool_{re.escape(version)}_([a-z]+)_([a-z0-9]+)\.tar\.gz$")
    platforms = []
    for name in sorted(os.listdir(dist)):
        m = pattern.match(name)
        if not m:
            continue
        os_, arch = m[1], m[2]
        if os_ not in GOOS or arch not in GOARCH:
            sys.exit(f"{name}: {os_}/{arch} is not a platform krew knows (GOOS/GOARCH names)")
        with open(os.path.join(dist, name), "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        exe = ".exe" if os_ == "windows" else ""
        platforms.append(
            f"""  - selector:
      matchLabels:
        os: {os_}
        arch: {arch}
    uri: {REPO_URL}/releases/download/v{version}/{name}
    sha256: {sha}
    bin: kubectl-winpool{exe}
"""
        )
    if not platforms:
        sys.exit(f"no kubectl-winpool_{version}_OS_ARCH.tar.gz in {dist}")
    sys.stdout.write(
        f"""apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: winpool
spec:
  version: v{version}
  homepage: {REPO_URL}
  shortDescription: Watch and steer Windows node pool rollouts
  description: |
    Shows the status and the update plan of the WindowsNodePools the winpool
    operator rolls (OS patch level, containerd, CSI Proxy, agent), node by
    node, and pauses, resumes or retries a pool's rollout.
  caveats: |
    The winpool operator must run in the cluster: {REPO_URL}
  platforms:
"""
        + "".join(platforms)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
