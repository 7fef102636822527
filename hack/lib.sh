# Shared by the hack/ scripts: where the tool cache lives and how to find a tool.
# shellcheck shell=bash
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
WINPOOL_CACHE="${WINPOOL_CACHE:-$HOME/.cache/winpool}"
TOOLS_BIN="$WINPOOL_CACHE/bin"
# Cargo's build folder, one per checkout (outside it, so a fresh clone of the
# same path builds warm): cargo judges a test binary fresh by timestamps, so
# two clones sharing one folder ran the other clone's newer-looking binary of
# an edited test. CARGO_TARGET_DIR, when set, wins.
WINPOOL_TARGET_DIR="$WINPOOL_CACHE/target/$(basename "$REPO_ROOT")-$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)"
# Each folder names its checkout; the folders of checkouts that are gone (CI's
# clean clones) are removed, or every clone would leave ~5 GB behind.
prune_target_dirs() {
  local d c
  for d in "$WINPOOL_CACHE"/target/*/; do
    c="$(cat "$d.checkout" 2>/dev/null)" || continue
    [[ -n "$c" && ! -e "$c/.git" ]] && rm -rf "$d"
  done
  return 0
}
prune_target_dirs
mkdir -p "$WINPOOL_TARGET_DIR" && printf '%s\n' "$REPO_ROOT" >"$WINPOOL_TARGET_DIR/.checkout"
# Builds must never reach for a toolchain other than the machine's own Go.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# tool_path NAME -> the cached binary for NAME at its pinned version.
tool_path() {
  case "$1" in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) echo "$TOOLS_BIN/$1-$K8S_VERSION" ;;
    etcd) echo "$TOOLS_BIN/etcd-$ETCD_VERSION" ;;
    kwok|kwokctl) echo "$TOOLS_BIN/$1-$KWOK_VERSION" ;;
    helm) echo "$TOOLS_BIN/helm-$HELM_VERSION" ;;
    actionlint) echo "$TOOLS_BIN/actionlint-$ACTIONLINT_VERSION" ;;
    *) die "unknown tool $1" ;;
  esac
}
