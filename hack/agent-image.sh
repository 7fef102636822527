#!/usr/bin/env bash
# Builds the node agent's image from Linux: cross-compiles winpool-agent.exe
# into a build context outside the repository (never committed), puts
# agent/Dockerfile next to it, and builds it with BuildKit for windows/amd64.
#
#   hack/agent-image.sh IMAGE[:TAG] [--push | --oci FILE]
#
#   --push       push to the registry (docker buildx --output=type=registry)
#   --oci FILE   write an OCI archive instead (import it with ctr / crane)
#   neither      only prepare the build context and print its path
#
# Env: VERSION (default: the crate version in Cargo.toml, the one place the
# version lives) is baked in as the agent's version;
# WINPOOL_AGENT_CONTEXT overrides the build context directory.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

image="${1:-}"
[[ -n "$image" ]] || die "usage: $0 IMAGE[:TAG] [--push | --oci FILE]"
mode="${2:-}"
version="${VERSION:-$(sed -n 's/^version = "\(.*\)"$/\1/p' "$REPO_ROOT/Cargo.toml" | head -n1)}"
ctx="${WINPOOL_AGENT_CONTEXT:-$WINPOOL_CACHE/agent-image}"

rm -rf "$ctx"
mkdir -p "$ctx"
log "building winpool-agent.exe $version (windows/amd64) into $ctx"
(
  cd "$REPO_ROOT/agent"
  CGO_ENABLED=0 GOOS=windows GOARCH=amd64 go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$ctx/winpool-agent.exe" ./cmd/winpool-agent
)
cp "$REPO_ROOT/agent/Dockerfile" "$ctx/Dockerfile"

build() {
  command -v docker >/dev/null || die "docker (with buildx) is not installed; the build context is ready in $ctx"
  # A Windows image needs a BuildKit builder that accepts windows/amd64.
  if ! docker buildx inspect winpool-windows >/dev/null 2>&1; then
    docker buildx create --name winpool-windows --platform windows/amd64 >/dev/null
  fi
  docker buildx build --builder winpool-windows --platform windows/amd64 -t "$image" "$@" "$ctx"
}

case "$mode" in
  --push) build --output=type=registry ;;
  --oci)
    [[ -n "${3:-}" ]] || die "--oci needs a file name"
    build --output="type=oci,dest=$3"
    ;;
  "") log "build context ready: $ctx (docker buildx build --platform windows/amd64 -t $image --output=type=registry $ctx)" ;;
  *) die "unknown option $mode" ;;
esac
