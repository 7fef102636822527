#!/usr/bin/env bash
# Scale benchmark: rollout efficiency, API cost, footprint and start-up of the
# operator on the local control plane with a simulated Windows fleet
# (hack/sim.sh: the real agent on every node, with a fake host). Prints
# one table and writes it to docs/BENCHMARKS.md with the machine and versions.
#
#   hack/bench.sh                 full run: 3 measured runs per size (about an hour on 2 cores)
#   hack/bench.sh --runs 5        more runs per size
#   hack/bench.sh --quick         1 run per size, no warm-up rollout (development)
#   hack/bench.sh --smoke         20 nodes, 1 run, about two minutes; writes .state/bench-smoke/BENCHMARKS.md
#                                 (the suite runs this to keep the script from rotting; nothing in it is timed)
#   hack/bench.sh --report-only   re-render the table from the last results (.state/bench/results.json)
#
# Other flags: --phases rollout,footprint  --rollout-sizes 100,1000  --footprint-sizes 1000,5000
#              --services N  --endpoints N  --fraction 0.2 (footprint runs stop there)  --whole yes|no
#              --keep (leave the last cluster up)  --no-build
#              --phases churn: a pool at rest while a Service's endpoints change every second, its agents
#              reading HNS every 15 s as real agents do
#              (--churn-nodes 1000, --churn-seconds 600); not in the default phases
#              --phases hns: rollouts paced by HNS (issue 46): per release, a pool of simulated nodes with
#              Services and pods behind them, rolled with rollout.hnsPacing off, then on: the fleet's
#              network-programming latency and the makespan (--hns-nodes 300, --hns-services 2000,
#              --hns-pods-per-node 30, --hns-releases ltsc2019,ltsc2022); not in the default phases
#              --phases staging: downloads before the drain (issue 47): a pool whose update's download takes
#              as long as its install, rolled with rollout.staging Disabled, then Enabled: each node's time
#              out of service, cordon → uncordon (--staging-nodes 40); not in the default phases
#              --phases hotpatch: a simulated year on a Windows Server 2025 pool enrolled in hotpatching (issue 47):
#              12 monthly patch levels, 4 of them baselines, rolled with rollout.hotpatch Disabled, then Enabled:
#              evictions and reboots per node (--hotpatch-nodes 10, --hotpatch-pods-per-node 5); not in the default phases
#              --phases compliance: kubectl winpool compliance over a year of synthesised records (issue 68),
#              seconds to answer and bytes a record (--compliance-nodes 5000); no cluster; not in the default phases
#              --max-unavailable 10%: the pools' rollout.maxUnavailable
# Environment: WINPOOL_CP_API_QPS (controller-manager/scheduler client QPS; unset = Kubernetes' defaults),
#              WINPOOL_BENCH_BIN (measure this binary instead of building one), WINPOOL_BENCH_REV (what it was
#              built from, for the table), WINPOOL_BENCH_CLUSTER / WINPOOL_BENCH_PORT_BASE,
#              WINPOOL_BENCH_APISERVER_PPROF=DIR (a kube-apiserver CPU profile of each measured rollout).
#
# The benchmark runs on a control plane of its own (WINPOOL_CLUSTER, default
# "bench", ports from WINPOOL_PORT_BASE, default 26500; smoke: "bench-smoke",
# 26510), never the tests' cluster, and takes it down when done. Measured with
# the release binary (built here); the smoke run uses whatever binary exists.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}"

mode=full build=1 pass=()
while (($#)); do
  case "$1" in
    --quick) mode=quick ;;
    --smoke) mode=smoke ;;
    --no-build) build=0 ;;
    --keep | --report-only) pass+=("$1") ;;
    --runs | --phases | --rollout-sizes | --footprint-sizes | --services | --endpoints | --fraction | --whole | --churn-nodes | --churn-seconds \
      | --staging-nodes | --compliance-nodes | --hotpatch-nodes | --hotpatch-pods-per-node | --hns-nodes | --hns-services | --hns-pods-per-node | --hns-releases | --max-unavailable)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      pass+=("$1" "$2"); shift ;;
    -h | --help) sed -n '2,33p' "$0"; exit 0 ;;
    *) die "unknown flag $1 (see $0 --help)" ;;
  esac
  shift
done

if [[ $mode == smoke ]]; then
  export WINPOOL_CLUSTER="${WINPOOL_BENCH_CLUSTER:-bench-smoke}"
  export WINPOOL_PORT_BASE="${WINPOOL_BENCH_PORT_BASE:-26510}"
  STATE="${WINPOOL_STATE:-$REPO_ROOT/.state}/bench-smoke"
  OUT="$STATE/BENCHMARKS.md"
else
  export WINPOOL_CLUSTER="${WINPOOL_BENCH_CLUSTER:-bench}"
  export WINPOOL_PORT_BASE="${WINPOOL_BENCH_PORT_BASE:-26500}"
  # Kubernetes' default client QPS unless set (see hack/cluster.sh): what most
  # clusters run. A rollout no longer goes through the DaemonSet controller (the
  # agents stay); a pool's first rollout still waits for it to create their pods.
  export WINPOOL_CP_API_QPS="${WINPOOL_CP_API_QPS-}"
  STATE="${WINPOOL_STATE:-$REPO_ROOT/.state}/bench"
  OUT="$REPO_ROOT/docs/BENCHMARKS.md"
fi
[[ "$WINPOOL_CLUSTER" != winpool ]] || die "the benchmark never runs on the tests' cluster 'winpool'"
mkdir -p "$STATE"

if [[ " ${pass[*]-} " != *" --report-only "* ]]; then
  "$HACK_DIR/build-tools.sh" >/dev/null
  BIN="${WINPOOL_BENCH_BIN:-}"
  if [[ -z "$BIN" && $mode == smoke ]]; then
    # The suite has just built the debug binary; the smoke run checks the script, not the numbers.
    for b in "$CARGO_TARGET_DIR/debug/winpool" "$CARGO_TARGET_DIR/release/winpool"; do
      [[ -x "$b" ]] && { BIN="$b"; break; }
    done
    [[ -n "$BIN" ]] || { cargo build -q --bin winpool; BIN="$CARGO_TARGET_DIR/debug/winpool"; }
  elif [[ -z "$BIN" ]]; then
    if ((build)); then
      log "building the release binary"
      cargo build --release --bin winpool
    fi
    BIN="$CARGO_TARGET_DIR/release/winpool"
  fi
  [[ -x "$BIN" ]] || die "no winpool binary at $BIN"
  write_crds
  # hack/sim.sh builds the fleet when agent/ changed: here, rather than inside a phase.
  out="$("$HACK_DIR/sim.sh" --help 2>&1)" || die "hack/sim.sh --help failed:
$out"
  rm -rf "$STATE/logs"
else
  BIN="${WINPOOL_BENCH_BIN:-$CARGO_TARGET_DIR/release/winpool}"
fi

log "benchmark ($mode) on cluster '$WINPOOL_CLUSTER' (ports from $WINPOOL_PORT_BASE), binary $BIN, state in $STATE"
cleanup() {
  if [[ " ${pass[*]-} " != *" --keep "* && " ${pass[*]-} " != *" --report-only "* ]]; then
    "$HACK_DIR/cluster.sh" down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
python3 "$HACK_DIR/bench/bench.py" --mode "$mode" --repo "$REPO_ROOT" --state "$STATE" --bin "$BIN" \
  --kubectl "$(tool_path kubectl)" --helm "$(tool_path helm)" --cluster-script "$HACK_DIR/cluster.sh" \
  --sim-script "$HACK_DIR/sim.sh" --agent-identity-script "$HACK_DIR/agent-identity.sh" \
  --out "$OUT" ${pass[@]+"${pass[@]}"}
