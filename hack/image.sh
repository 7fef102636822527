#!/usr/bin/env bash
# Builds the operator's container image with buildah (no Docker daemon):
# a static release binary (glibc crt-static; rustls, so no OpenSSL) on an empty
# base (Containerfile), user 65532, OCI annotations for version, revision and
# source. The tag is the crate version (Cargo.toml, the one place it lives).
# Reproducible from a clean checkout: file times and the image's creation time
# come from the last commit, build paths are remapped out of the binary.
#
#   hack/image.sh            build; prints the image reference and its size
#   hack/image.sh --print    print the image reference the build would tag
#
# Environment: WINPOOL_IMAGE_REPOSITORY (default ghcr.io/winpool/winpool),
# WINPOOL_IMAGE_PROFILE (cargo profile, default release; the suite uses
# image-test, a lighter build of the same static binary),
# BUILDAH_STORAGE_DRIVER (default vfs: works as root without fuse-overlayfs).
# Needs root for buildah (installs Debian's buildah with apt-get if missing).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

REPOSITORY="${WINPOOL_IMAGE_REPOSITORY:-ghcr.io/winpool/winpool}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
[[ -n "$VERSION" ]] || die "no version in Cargo.toml"
IMAGE="$REPOSITORY:$VERSION"
if [[ "${1:-}" == "--print" ]]; then
  echo "$IMAGE"
  exit 0
fi

export STORAGE_DRIVER="${BUILDAH_STORAGE_DRIVER:-vfs}"
if ! command -v buildah >/dev/null; then
  [[ $(id -u) == 0 ]] || die "buildah is missing; install it (Debian: apt-get install buildah)"
  log "installing buildah (Debian package)"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
fi

# The machine's own architecture: the release workflow builds the arm64
# image on an arm64 runner.
TARGET="$(uname -m)-unknown-linux-gnu"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}"
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
EPOCH="$(git log -1 --format=%ct 2>/dev/null || echo 0)"
[[ -z "$(git status --porcelain 2>/dev/null)" ]] || REVISION="$REVISION-dirty"

PROFILE="${WINPOOL_IMAGE_PROFILE:-release}"
start=$(date +%s)
log "building the static binary ($TARGET, profile $PROFILE)"
# --target keeps crt-static off the build scripts and proc macros, which must
# stay dynamic. Workspace paths are relative already; the remap keeps the
# registry path out of panic messages (and the flags equal across clones, so
# a fresh clone reuses the cached dependencies).
RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
  cargo build --profile "$PROFILE" --locked --target "$TARGET" --bin winpool
BIN="$CARGO_TARGET_DIR/$TARGET/$PROFILE/winpool"
if ldd "$BIN" 2>&1 | grep -q '=>'; then
  die "$BIN is dynamically linked: $(ldd "$BIN" 2>&1 | tr '\n' ' ')"
fi

CONTEXT="$(mktemp -d "${TMPDIR:-/tmp}/winpool-image.XXXXXX")"
trap 'rm -rf "$CONTEXT"' EXIT
install -m 0755 "$BIN" "$CONTEXT/winpool"
touch -d "@$EPOCH" "$CONTEXT/winpool"

log "building $IMAGE"
annotations=(
  "org.opencontainers.image.title=winpool"
  "org.opencontainers.image.description=Kubernetes operator for Windows node pools"
  "org.opencontainers.image.version=$VERSION"
  "org.opencontainers.image.revision=$REVISION"
  "org.opencontainers.image.source=https://github.com/winpool/winpool"
  "org.opencontainers.image.licenses=Apache-2.0"
)
args=()
for a in "${annotations[@]}"; do args+=(--annotation "$a" --label "$a"); done
buildah build --quiet --isolation chroot --layers=false --timestamp "$EPOCH" \
  --format oci "${args[@]}" -f Containerfile -t "$IMAGE" "$CONTEXT" >/dev/null

size_bytes="$(buildah inspect --type image --format '{{.Size}}' "$IMAGE" 2>/dev/null || echo 0)"
digest="$(buildah inspect --type image --format '{{.FromImageDigest}}' "$IMAGE")"
log "built $IMAGE ($digest) in $(($(date +%s) - start))s; binary $(du -k "$BIN" | cut -f1) KiB"
echo "$IMAGE"
