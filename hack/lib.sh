# Shared by the hack/ scripts: where the tool cache lives and how to find a tool.
# shellcheck shell=bash
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=versions.env
source "$HACK_DIR/versions.env"
WINPOOL_CACHE="${WINPOOL_CACHE:-$HOME/.cache/winpool}"
TOOLS_BIN="$WINPOOL_CACHE/bin"
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

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
# A new checkout (CI's clean clone) starts from a copy of the newest other
# checkout's folder, so it compiles winpool alone, not its dependencies again.
# winpool's own units are dropped from the copy: cargo judges them by file
# times, and another checkout's newer build would pass for this one's.
seed_target_dir() {
  [[ -e "$WINPOOL_TARGET_DIR/.checkout" ]] && return 0
  local from
  # No other folder (a fresh machine) is no error: ls and grep then fail.
  from="$(ls -td "$WINPOOL_CACHE"/target/*/ 2>/dev/null | grep -vxF "$WINPOOL_TARGET_DIR/" | head -n1 || true)"
  [[ -n "$from" ]] || return 0
  log "new checkout: its build folder starts as a copy of ${from%/}"
  mkdir -p "$WINPOOL_TARGET_DIR"
  cp -a --reflink=auto "$from." "$WINPOOL_TARGET_DIR/"
  find "$WINPOOL_TARGET_DIR" -maxdepth 4 -type d -path '*/.fingerprint/winpool-*' -prune -exec rm -rf {} +
}
mkdir -p "$WINPOOL_CACHE/target"
# Seeded before the gone checkouts' folders are pruned: the last clean clone's
# folder is often the newest.
{ flock 9; seed_target_dir; prune_target_dirs; } 9>"$WINPOOL_CACHE/target/.lock"
mkdir -p "$WINPOOL_TARGET_DIR" && printf '%s\n' "$REPO_ROOT" >"$WINPOOL_TARGET_DIR/.checkout"
# Builds must never reach for a toolchain other than the machine's own Go.
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"


# The CRDs in crds/ (the chart's files/crds links there), written from the
# Rust types: a build output like the chart's schema and dashboard, never tracked.
write_crds() {
  local flag out
  mkdir -p "$REPO_ROOT/crds"
  for flag in "" --report --operation; do
    case "$flag" in
      "") out=windowsnodepools ;; --report) out=windowsnodereports ;; --operation) out=windowsnodeoperations ;;
    esac
    (cd "$REPO_ROOT" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}" cargo run -q --bin winpool -- crd $flag \
      >"crds/$out.winpool.dev.yaml.tmp") || return 1
    mv "$REPO_ROOT/crds/$out.winpool.dev.yaml.tmp" "$REPO_ROOT/crds/$out.winpool.dev.yaml"
  done
}

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
