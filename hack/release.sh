#!/usr/bin/env bash
# Builds into dist/ (emptied first) everything a release publishes, without
# Docker:
#   winpool-operator-VERSION.oci.tar    the operator image for this machine's
#                                       architecture (hack/image.sh, buildah)
#   winpool-agent-VERSION.oci.tar       the node agent's Windows HostProcess
#                                       image, windows/amd64, one Windows base
#                                       layer (hack/tools/winimage)
#   winpool-VERSION.tgz                 the Helm chart
#   kubectl-winpool_VERSION_OS_ARCH.tar.gz  the kubectl plugin and LICENSE
#   <artifact>.spdx.json                an SPDX 2.3 SBOM per artifact (hack/sbom.py)
#   winpool.yaml                        the krew plugin manifest (hack/krew-manifest.py)
#   SHA256SUMS                          over every other file in dist/
#
#   hack/release.sh VERSION [--skip-cargo] [--skip-images]
#                           [--plugin OS_ARCH=BINARY]... [--operator-image OS_ARCH=ARCHIVE]...
#
# VERSION (a leading v is dropped) must be the crate version in Cargo.toml:
# the images, the chart and the plugin all carry it.
#   --skip-cargo     no cargo: no operator image, no plugin built here, and
#                    no SBOM for a Rust artifact (for trying the rest out;
#                    a release has every SBOM)
#   --skip-images    no operator image (buildah); the agent image needs
#                    neither Docker nor buildah and is always built
#   --plugin linux_arm64=path/to/kubectl-winpool
#                    package a kubectl-winpool built elsewhere (the release
#                    workflow builds each platform on its own runner); without
#                    one for linux_amd64 it is built here
#   --operator-image linux_arm64=path/to/archive.oci.tar
#                    add the operator image built on another architecture as
#                    winpool-operator-VERSION-OS_ARCH.oci.tar
#
# Every file's time comes from the last commit (SOURCE_DATE_EPOCH), so a
# rebuild of the same commit gives the same agent image, plugin archives and
# SBOMs. Environment: WINPOOL_IMAGE_REPOSITORY, BUILDAH_STORAGE_DRIVER (as
# hack/image.sh), WINPOOL_AGENT_REPOSITORY (default ghcr.io/winpool/agent).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

usage() { sed -n '2,/^set -euo pipefail$/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

VERSION=""
skip_cargo=0
skip_images=0
declare -A plugin_bins=() operator_archives=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --skip-cargo) skip_cargo=1 ;;
    --skip-images) skip_images=1 ;;
    --plugin | --operator-image)
      [[ "${2:-}" == *=* ]] || die "$1 needs OS_ARCH=PATH"
      key="${2%%=*}" path="${2#*=}"
      [[ "$key" =~ ^(linux|darwin|windows)_(amd64|arm64)$ ]] || die "$1 $2: OS_ARCH is e.g. linux_arm64"
      [[ -f "$path" ]] || die "$1 $2: no such file"
      if [[ "$1" == --plugin ]]; then plugin_bins[$key]="$(realpath "$path")"; else operator_archives[$key]="$(realpath "$path")"; fi
      shift
      ;;
    -h | --help) usage ;;
    -*) die "unknown option $1" ;;
    *) [[ -z "$VERSION" ]] || die "one VERSION only"; VERSION="${1#v}" ;;
  esac
  shift
done
[[ -n "$VERSION" ]] || usage
crate_version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
[[ "$VERSION" == "$crate_version" ]] || die "VERSION $VERSION is not the crate version $crate_version (Cargo.toml)"

DIST="$REPO_ROOT/dist"
AGENT_IMAGE="${WINPOOL_AGENT_REPOSITORY:-ghcr.io/winpool/agent}:$VERSION"
EPOCH="$(git log -1 --format=%ct)"
export SOURCE_DATE_EPOCH="$EPOCH"
REVISION="$(git rev-parse HEAD)"
[[ -z "$(git status --porcelain)" ]] || REVISION="$REVISION-dirty"
HELM="$(tool_path helm)"
[[ -x "$HELM" ]] || die "helm $HELM_VERSION is missing: run hack/build-tools.sh"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/winpool-release.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
start=$(date +%s)

rm -rf "$DIST"
mkdir -p "$DIST"

# Rust targets by release platform name, for the plugin archives' names and
# for cargo metadata --filter-platform (an SBOM lists what that target links).
declare -A TRIPLE=(
  [linux_amd64]=x86_64-unknown-linux-gnu [linux_arm64]=aarch64-unknown-linux-gnu
  [darwin_amd64]=x86_64-apple-darwin [darwin_arm64]=aarch64-apple-darwin
  [windows_amd64]=x86_64-pc-windows-msvc [windows_arm64]=aarch64-pc-windows-msvc
)
case "$(uname -m)" in
  x86_64) host_platform=linux_amd64 ;;
  aarch64) host_platform=linux_arm64 ;;
  *) host_platform="" ;;
esac

# ---- 1. the operator image -----------------------------------------------------
if [[ $skip_images == 1 || $skip_cargo == 1 ]]; then
  log "operator image: skipped (--skip-images/--skip-cargo)"
else
  [[ -n "$host_platform" ]] || die "no operator image for $(uname -m)"
  export STORAGE_DRIVER="${BUILDAH_STORAGE_DRIVER:-vfs}"
  image="$("$HACK_DIR/image.sh" | tail -n1)"
  [[ "$image" == *":$VERSION" ]] || die "hack/image.sh tagged $image, not :$VERSION"
  # The reference in the archive's index names the image for ctr import and
  # skopeo copy.
  buildah push --quiet "$image" "oci-archive:$DIST/winpool-operator-$VERSION.oci.tar:$image" >/dev/null
  # Read back what was written: the platform, the entrypoint and the
  # non-root user the chart's Pod Security settings rely on.
  # (hack/tools/winimage check: the repository's one OCI reading-back.)
  (cd "$HACK_DIR/tools/winimage" && go run -trimpath . check -platform "${host_platform/_//}" \
    -entrypoint /winpool -user 65532:65532 -file /winpool "$DIST/winpool-operator-$VERSION.oci.tar") >/dev/null
  log "operator image: $image ($host_platform)"
fi
for platform in "${!operator_archives[@]}"; do
  cp "${operator_archives[$platform]}" "$DIST/winpool-operator-$VERSION-${platform/_/-}.oci.tar"
  log "operator image: $platform from ${operator_archives[$platform]}"
done

# ---- 2. the agent image (windows/amd64, no Docker, no base image pull) ----------
# hack/agent-image.sh, the one recipe of the agent's image (hack/test.sh builds
# it too): the exe cross-built, the image written by hack/tools/winimage.
# Labelled as hack/image.sh labels and annotates the operator image.
agent_labels=(
  "org.opencontainers.image.title=winpool-agent"
  "org.opencontainers.image.description=winpool node agent (Windows HostProcess container)"
  "org.opencontainers.image.version=$VERSION"
  "org.opencontainers.image.revision=$REVISION"
  "org.opencontainers.image.source=https://github.com/winpool/winpool"
  "org.opencontainers.image.licenses=Apache-2.0"
)
label_args=()
for l in "${agent_labels[@]}"; do label_args+=(--label "$l"); done
mkdir -p "$WORK/agent"
VERSION="$VERSION" "$HACK_DIR/agent-image.sh" "$AGENT_IMAGE" --oci "$DIST/winpool-agent-$VERSION.oci.tar" \
  --exe-out "$WORK/agent/winpool-agent.exe" "${label_args[@]}" >"$WORK/agent-image.txt" 2>"$WORK/agent-build.log" \
  || { cat "$WORK/agent-build.log" >&2; die "building the agent image failed"; }
log "agent image: $AGENT_IMAGE (windows/amd64) $(sed -n 's/^manifest *//p' "$WORK/agent-image.txt")"

# ---- 3. the chart ----------------------------------------------------------------
# The agent runs as SYSTEM on every node: the released chart names it by the
# digest of the image built above (the publish job pushes it with that
# digest and checks so), not by a tag that could be moved.
AGENT_DIGEST="$(sed -n 's/^manifest *\(sha256:[0-9a-f]\{64\}\).*/\1/p' "$WORK/agent-image.txt")"
[[ -n "$AGENT_DIGEST" ]] || die "no agent image digest in $WORK/agent-image.txt"
# -L: the chart's files/crds is a link to crds/, which the package holds as files.
write_crds
cp -rL charts/winpool "$WORK/chart-src"
python3 "$HACK_DIR/chart-docs.py" --schema "$WORK/chart-src"
python3 "$HACK_DIR/dashboard.py" "$WORK/chart-src/files/dashboard.json"
python3 "$HACK_DIR/pin_agent_digest.py" "$WORK/chart-src/values.yaml" "$AGENT_DIGEST"
"$HELM" package "$WORK/chart-src" --version "$VERSION" --app-version "$VERSION" -d "$WORK" >/dev/null
# helm stamps every file with the time of packaging; the same files in the
# same order with the commit's time make the package reproducible.
mkdir -p "$WORK/chart"
tar -xzmf "$WORK/winpool-$VERSION.tgz" -C "$WORK/chart"
tar -tzf "$WORK/winpool-$VERSION.tgz" >"$WORK/chart.list"
tar --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" --format=ustar --no-recursion \
  -C "$WORK/chart" -T "$WORK/chart.list" -cf - | gzip -9n >"$DIST/winpool-$VERSION.tgz"
log "chart: winpool-$VERSION.tgz (agent image $AGENT_DIGEST)"

# ---- 4. the kubectl plugin -----------------------------------------------------
package_plugin() { # OS_ARCH BINARY
  local platform="$1" bin="$2" exe="" stage
  [[ "$platform" == windows_* ]] && exe=".exe"
  stage="$WORK/plugin-$platform"
  mkdir -p "$stage"
  install -m 0755 "$bin" "$stage/kubectl-winpool$exe"
  install -m 0644 LICENSE "$stage/LICENSE"
  # krew extracts the whole archive and wants a license file in it.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" --format=ustar \
    -C "$stage" -cf - "kubectl-winpool$exe" LICENSE | gzip -9n >"$DIST/kubectl-winpool_${VERSION}_$platform.tar.gz"
  log "plugin: kubectl-winpool_${VERSION}_$platform.tar.gz"
}
if [[ -z "${plugin_bins[linux_amd64]:-}" ]]; then
  if [[ $skip_cargo == 1 ]]; then
    log "plugin linux_amd64: skipped (--skip-cargo)"
  else
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}"
    # Static like the operator (hack/image.sh), so it runs on any glibc.
    RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
      cargo build --release --locked --target x86_64-unknown-linux-gnu --bin kubectl-winpool
    plugin_bins[linux_amd64]="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/kubectl-winpool"
  fi
fi
for platform in "${!plugin_bins[@]}"; do package_plugin "$platform" "${plugin_bins[$platform]}"; done

# ---- 5. SBOMs --------------------------------------------------------------------
sbom() { # ARTIFACT KIND ARGS...
  local artifact="$1" kind="$2"
  shift 2
  python3 "$HACK_DIR/sbom.py" "$kind" --artifact "$DIST/$artifact" --version "$VERSION" --out "$DIST/$artifact.spdx.json" "$@"
}
# Rust artifacts: the dependency graph of the target the artifact was built
# for, so a macOS plugin's SBOM lists no Windows crates.
sbom_cargo() { # ARTIFACT OS_ARCH ARGS...
  local artifact="$1" triple="${TRIPLE[$2]}" metadata
  shift 2
  if [[ $skip_cargo == 1 ]]; then
    log "SBOM of $artifact: skipped (--skip-cargo)"
    return
  fi
  metadata="$WORK/cargo-metadata-$triple.json"
  [[ -f "$metadata" ]] || cargo metadata --format-version 1 --locked --filter-platform "$triple" >"$metadata"
  sbom "$artifact" cargo --metadata "$metadata" --lockfile Cargo.lock "$@"
}
OPERATOR_IMAGE="${WINPOOL_IMAGE_REPOSITORY:-ghcr.io/winpool/winpool}:$VERSION"
(cd agent && go list -m -json all) >"$WORK/agent-modules.json"
go version -m "$WORK/agent/winpool-agent.exe" >"$WORK/agent-buildinfo.txt"
for f in "$DIST"/*; do
  name="$(basename "$f")"
  case "$name" in
    "winpool-agent-$VERSION.oci.tar")
      sbom "$name" go --modules "$WORK/agent-modules.json" --buildinfo "$WORK/agent-buildinfo.txt" --image-ref "$AGENT_IMAGE" ;;
    "winpool-$VERSION.tgz")
      sbom "$name" chart ;;
    "winpool-operator-$VERSION.oci.tar")
      sbom_cargo "$name" "$host_platform" --image-ref "$OPERATOR_IMAGE" ;;
    "winpool-operator-$VERSION-"*.oci.tar)
      platform="${name#"winpool-operator-$VERSION-"}"
      platform="${platform%.oci.tar}"
      sbom_cargo "$name" "${platform/-/_}" --image-ref "$OPERATOR_IMAGE" ;;
    "kubectl-winpool_${VERSION}_"*.tar.gz)
      platform="${name#"kubectl-winpool_${VERSION}_"}"
      sbom_cargo "$name" "${platform%.tar.gz}" ;;
    *) die "no SBOM rule for dist/$name" ;;
  esac
done
log "SBOMs: $(find "$DIST" -name '*.spdx.json' | wc -l)"

# ---- 6. the krew manifest --------------------------------------------------------
if compgen -G "$DIST/kubectl-winpool_${VERSION}_*.tar.gz" >/dev/null; then
  python3 "$HACK_DIR/krew-manifest.py" "$VERSION" "$DIST" >"$DIST/winpool.yaml"
  log "krew manifest: winpool.yaml"
else
  log "krew manifest: skipped (no plugin archive)"
fi

# ---- 7. checksums ----------------------------------------------------------------
(cd "$DIST" && find . -maxdepth 1 -type f -printf '%f\n' | LC_ALL=C sort | xargs sha256sum) >"$WORK/SHA256SUMS"
mv "$WORK/SHA256SUMS" "$DIST/SHA256SUMS"
log "release $VERSION in dist/ ($(($(date +%s) - start))s):"
(cd "$DIST" && ls -l) >&2
