#!/usr/bin/env bash
# Builds the node agent's image from Linux, as the release does (its one
# recipe): cross-compiles winpool-agent.exe and writes a windows/amd64 OCI
# image archive with hack/tools/winimage, without Docker and without pulling
# a base image. The image is a HostProcess container's: one layer with the
# agent, its entrypoint, and no PATH of its own (a HostProcess container's
# process gets its user's host environment with the image's variables
# appended, so an image PATH would replace the host's, and the agent's
# exec.LookPath would miss containerd in Program Files and the kubelet's
# tools in C:\k).
#
#   hack/agent-image.sh IMAGE[:TAG] [--oci FILE] [--label k=v]... [--exe-out FILE]
#
#   --oci FILE      where the archive goes (default: the cache's
#                   agent-image/agent.oci.tar); push it with
#                   `skopeo copy oci-archive:FILE docker://IMAGE`, or import it
#                   on a node with `ctr -n k8s.io images import --platform windows/amd64 FILE`
#   --label k=v     an image label (repeatable; the release sets the OCI ones)
#   --exe-out FILE  keep a copy of the winpool-agent.exe the image holds
#
# Env: VERSION (default: the crate version in Cargo.toml, the one place the
# version lives) is baked in as the agent's version; SOURCE_DATE_EPOCH (default:
# the last commit's time) is every file's time, so the same inputs give the
# same image digest. Prints winimage's summary (its `manifest sha256:…` line).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

image="${1:-}"
[[ -n "$image" && "$image" != -* ]] || die "usage: $0 IMAGE[:TAG] [--oci FILE] [--label k=v]... [--exe-out FILE]"
shift
out="$WINPOOL_CACHE/agent-image/agent.oci.tar"
exe_out=""
labels=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --oci) [[ -n "${2:-}" ]] || die "--oci needs a file name"; out="$2"; shift ;;
    --label) [[ "${2:-}" == *=* ]] || die "--label needs k=v"; labels+=(-label "$2"); shift ;;
    --exe-out) [[ -n "${2:-}" ]] || die "--exe-out needs a file name"; exe_out="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done
version="${VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)}"
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$REPO_ROOT" log -1 --format=%ct)}"

work="$(mktemp -d "${TMPDIR:-/tmp}/winpool-agent-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
log "building winpool-agent.exe $version (windows/amd64)"
(
  cd "$REPO_ROOT/agent"
  CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$work/winpool-agent.exe" ./cmd/winpool-agent
)
(cd "$HACK_DIR/tools/winimage" && go build -trimpath -o "$work/winimage" .)
mkdir -p "$(dirname "$out")"
"$work/winimage" build -exe "$work/winpool-agent.exe" -ref "$image" -epoch "$epoch" "${labels[@]}" -out "$out"
[[ -z "$exe_out" ]] || cp "$work/winpool-agent.exe" "$exe_out"
log "agent image: $image (windows/amd64) in $out"
