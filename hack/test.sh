#!/usr/bin/env bash
# The whole test suite, from a fresh machine: builds the control-plane tools
# if they are missing, starts the local control plane, then runs formatting,
# lints, unit tests, integration tests against the real API server, the
# chart checks and the alert-rule tests, and stops the control plane again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# Each step's time goes to the log and to target-test-logs/steps.tsv (CI keeps
# it as an artifact), so a slower suite shows which step grew.
STEPS="$REPO_ROOT/target-test-logs/steps.tsv"
mkdir -p "$(dirname "$STEPS")"
printf 'seconds\tstep\n' >"$STEPS"
start=$(date +%s)
step_start=$start
step_name=""
step() {
  local now; now=$(date +%s)
  [[ -z "$step_name" ]] || printf '%s\t%s\n' $((now - step_start)) "$step_name" >>"$STEPS"
  step_start=$now
  step_name="$*"
  log "== $* ($((now - start))s)"
}

step "tools"
"$HACK_DIR/build-tools.sh"

step "cargo fmt --check"
cargo fmt --check

step "CRDs (crds/, written from the types)"
write_crds

step "cargo clippy"
cargo clippy --all-targets -- -D warnings

# Doc comments are the CRDs' descriptions and the plugin's help too; a broken
# link or an unescaped tag in the others is a comment nobody can follow.
step "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

# The node agent (Go): the same code runs on Windows nodes and, over a
# simulated Windows machine (fakewin), in the simulated fleet the integration
# tests below use.
step "agent: gofmt, go vet, go test (linux) and GOOS=windows build + vet; actionlint"
(
  cd agent
  unformatted="$(gofmt -l .)"
  [[ -z "$unformatted" ]] || die "gofmt: these files need formatting: $unformatted"
  go vet ./...
  go test -count=1 ./...
  GOOS=windows GOARCH=amd64 go vet ./...
  # The simulated fleet is a module of its own, so the shipping agent's
  # module graph (and its SBOM) is the agent's; it runs on Linux only.
  cd fleet
  go vet ./...
  go test -count=1 ./...
)
# The Windows workflow (.github/workflows) runs the agent's tests on a real
# Windows host; here it is only linted. actionlint exits non-zero on any
# finding (and runs shellcheck on bash run: blocks when shellcheck is on PATH).
"$(tool_path actionlint)" .github/workflows/*.yml
# The agent's Windows image, by the release's one recipe (the exe
# cross-built, hack/tools/winimage writes and verifies the OCI archive).
"$HACK_DIR/agent-image.sh" "ghcr.io/winpool/agent:$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"

# The release's builders that need neither cargo nor buildah: the agent's
# Windows image and the reading-back of every image the release writes
# (hack/tools/winimage: its layout checks, check, and the broken
# layouts they refuse), hack/tools/wincheck (it imports the image on Windows,
# .github/workflows/windows.yml; here it is only cross-vetted), the SBOM
# generator, and hack/release.sh itself without its cargo and buildah steps.
step "release: winimage, wincheck (GOOS=windows vet), sbom.py, release.sh --skip-cargo --skip-images"
(
  cd hack/tools
  unformatted="$(gofmt -l winimage wincheck)"
  [[ -z "$unformatted" ]] || die "gofmt: these files need formatting: $unformatted"
  (cd winimage && go vet ./... && go test -count=1 ./...)
  (cd wincheck && GOOS=windows go vet ./...)
)
python3 -m unittest discover -s hack -p 'test_*.py'
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
"$HACK_DIR/release.sh" "$VERSION" --skip-cargo --skip-images

# How Flux (kstatus) and Argo CD (docs/gitops/argocd-health.lua under
# gopher-lua, set up as Argo CD sets it up) judge a pool in every state the
# operator writes (tests/gitops/testdata/pools, written by the operator's status
# code first). A Go module of its own, so the agent never builds with the GitOps
# tools' dependencies; they come through the Go proxy like the agent's.
step "gitops: Argo CD health check (gopher-lua) and kstatus"
cargo test -q --lib status::gitops
(
  cd tests/gitops
  unformatted="$(gofmt -l .)"
  [[ -z "$unformatted" ]] || die "gofmt: these files need formatting: $unformatted"
  go vet ./...
  go test -count=1 ./...
)

# The operator image a cluster pulls (static binary, empty base); the
# integration tests run it once (tests/image.rs), so build it before them.
step "operator image (hack/image.sh)"
WINPOOL_IMAGE="$(WINPOOL_IMAGE_PROFILE=image-test "$HACK_DIR/image.sh" | tail -n1)"
export WINPOOL_IMAGE

step "local control plane"
started_here=0
cleanup() { if [[ $started_here == 1 ]]; then "$HACK_DIR/cluster.sh" down || true; fi; }
# Set before `up`, so that a start that fails halfway is taken down too.
trap cleanup EXIT
if ! "$HACK_DIR/cluster.sh" status >/dev/null 2>&1; then
  started_here=1
  "$HACK_DIR/cluster.sh" up
fi

# The chaos soak replays one known schedule in the suite; set WINPOOL_CHAOS_SEED
# (or unset it for a random, printed seed) to soak with others.
export WINPOOL_CHAOS_SEED="${WINPOOL_CHAOS_SEED-11}"
[[ -n "$WINPOOL_CHAOS_SEED" ]] || unset WINPOOL_CHAOS_SEED

step "cargo test (unit + integration against the local control plane)"
cargo test --all-targets -- --test-threads="${WINPOOL_TEST_THREADS:-4}"

if [[ -x "$HACK_DIR/alerts-test.sh" ]]; then
  step "alert rules (promtool)"
  "$HACK_DIR/alerts-test.sh"
fi
if [[ -x "$HACK_DIR/chart-test.sh" ]]; then
  # The chart as released: the package hack/release.sh built above, unpacked.
  step "Helm chart (the package in dist/)"
  "$HACK_DIR/chart-test.sh" "dist/winpool-$VERSION.tgz"
fi
if [[ -x "$HACK_DIR/bench.sh" ]]; then step "benchmark smoke run (20 nodes; keeps hack/bench.sh from rotting, times nothing)"; "$HACK_DIR/bench.sh" --smoke --phases rollout,footprint,hns; fi

# The README's first command, as a new user runs it: it fails unless every
# pool it applies rolls out. Its cluster ("demo") has ports of its own.
step "the demo (hack/demo.sh, then down)"
demo_ok=0
WINPOOL_DEMO_TIMEOUT="${WINPOOL_DEMO_TIMEOUT:-300}" "$HACK_DIR/demo.sh" && demo_ok=1
"$HACK_DIR/demo.sh" down
[[ $demo_ok == 1 ]] || die "the demo failed; its logs: ${WINPOOL_STATE:-$REPO_ROOT/.state}/demo/"
step "all tests passed"
column -t -s $'\t' "$STEPS" >&2 || cat "$STEPS" >&2
