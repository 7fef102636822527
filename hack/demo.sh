#!/usr/bin/env bash
# One command from a fresh machine to a live rollout: builds what is missing,
# starts a local control plane (its own cluster, "demo", beside the tests'),
# a simulated fleet of 16 Windows nodes in three pools, a PDB-protected
# workload, the operator, and then rolls all three pools to a new patch level
# while it shows the progress.
#
#   hack/demo.sh          run the demo (leaves it running to play with)
#   hack/demo.sh down     stop the operator, the fleet and the cluster
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
export WINPOOL_CLUSTER="${WINPOOL_CLUSTER:-demo}"
export WINPOOL_PORT_BASE="${WINPOOL_PORT_BASE:-26450}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$WINPOOL_TARGET_DIR}"
STATE="${WINPOOL_STATE:-$REPO_ROOT/.state}/demo"
mkdir -p "$STATE"
METRICS_PORT="${WINPOOL_DEMO_METRICS_PORT:-26480}"
WINPOOL="$CARGO_TARGET_DIR/debug/winpool"

stop_bg() {
  for pidfile in "$STATE"/*.pid; do
    [[ -e "$pidfile" ]] || continue
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
}

if [[ "${1:-}" == "down" ]]; then
  stop_bg
  "$HACK_DIR/cluster.sh" down
  log "demo stopped; nothing of it is running"
  exit 0
fi

# Each step says how long it took, and the end sums them up, so a slow fresh
# machine shows where its time went.
demo_start=$(date +%s)
step_start=$demo_start
step_name=""
timings=()
step() {
  local now; now=$(date +%s)
  [[ -z "$step_name" ]] || timings+=("$(printf '%5ss  %s' $((now - step_start)) "$step_name")")
  step_start=$now
  step_name="$1"
  [[ -z "$step_name" ]] || log "step $step_name"
}

step "1/6: tools (cold: ~15 min of Go builds; warm: instant)"
"$HACK_DIR/build-tools.sh" demo
step "2/6: winpool, its kubectl plugin and the simulated fleet (cold: a few minutes of cargo and go build)"
cargo build --bin winpool --bin kubectl-winpool
write_crds
# Built now, so the fleets below start at once instead of racing the wait for their nodes.
"$HACK_DIR/sim.sh" --build-only >/dev/null
PLUGIN_DIR="$CARGO_TARGET_DIR/debug"
step "3/6: local control plane '$WINPOOL_CLUSTER'"
"$HACK_DIR/cluster.sh" up
KUBECONFIG="$("$HACK_DIR/cluster.sh" kubeconfig)"
export KUBECONFIG
KUBECTL="$(tool_path kubectl)"
k() { "$KUBECTL" "$@"; }

step "4/6: CRD, simulated fleet (16 nodes) and a PDB-protected workload"
k apply -f crds/ >/dev/null
# Polled: kubectl wait --for=condition fails at once, rather than waiting, on
# a CRD read before the API server wrote any condition into it.
established() { [[ "$(k get "crd/$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]]; }
for crd in windowsnodepools.winpool.dev windowsnodereports.winpool.dev windowsnodeoperations.winpool.dev; do
  for _ in $(seq 300); do established "$crd" && break; sleep 0.2; done
  established "$crd" || die "CRD $crd is not Established after 60s"
done
stop_bg
start_bg() { # name, program, args...
  local name="$1"; shift
  "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}
# The agents' identity as the chart installs it: ServiceAccount winpool-agent,
# its RBAC, and the admission policy that keeps each agent to its own Node.
"$HACK_DIR/agent-identity.sh" winpool-agents >/dev/null
# Every simulated node runs the real agent code (agent/) on a fake Windows host.
# win22-web asks for DSR (networking.kubeProxy.enableDSR), so its nodes run
# kube-proxy with --enable-dsr, as AKS's Windows nodes do; without it the
# agents' preflight holds the pool (PreflightBlocked), as it should.
start_bg sim-web "$HACK_DIR/sim.sh" --nodes 6 --name-prefix win22-web- --labels pool=win22-web --os ltsc2022 --build 10.0.20348.2700 --containerd 1.7.20+azure --kube-proxy-dsr --apply-time 4s
start_bg sim-batch "$HACK_DIR/sim.sh" --nodes 6 --name-prefix win22-batch- --labels pool=win22-batch --os ltsc2022 --build 10.0.20348.2700 --containerd 1.7.20 --apply-time 4s
start_bg sim-legacy "$HACK_DIR/sim.sh" --nodes 4 --name-prefix win19-legacy- --labels pool=win19-legacy --os ltsc2019 --build 10.0.17763.6293 --containerd 1.7.20 --cni l2bridge --apply-time 6s
# Waits for all 16 (a fleet that exits is reported at once, with its log).
deadline=$(( $(date +%s) + ${WINPOOL_DEMO_NODES_TIMEOUT:-180} ))
while :; do
  ready=$(k get nodes -l kubernetes.io/os=windows -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True || true)
  [[ "$ready" -ge 16 ]] && break
  for sim in sim-web sim-batch sim-legacy; do
    kill -0 "$(cat "$STATE/$sim.pid")" 2>/dev/null || die "the simulated fleet $sim exited; its log: $STATE/$sim.log"
  done
  [[ $(date +%s) -lt $deadline ]] || die "only $ready of 16 Windows nodes Ready after ${WINPOOL_DEMO_NODES_TIMEOUT:-180}s; fleet logs: $STATE/sim-*.log"
  sleep 0.5
done
log "  $ready Windows nodes Ready"
k apply -f examples/demo/workload.yaml >/dev/null

step "5/6: operator (metrics on http://127.0.0.1:$METRICS_PORT/metrics)"
start_bg operator "$WINPOOL" run --metrics-addr "127.0.0.1:$METRICS_PORT" --lease-namespace default
step "6/6: applying three pools with a new patch level; watching the rollout"
k apply -f examples/demo/pools.yaml >/dev/null

show() {
  printf '\n%s\n' "$(date +%H:%M:%S)"
  k get wnp 2>/dev/null || true
  printf '%-14s %8s %9s %9s %10s %8s %7s\n' POOL PENDING DRAINING APPLYING VERIFYING UPDATED FAILED
  for p in win22-web win22-batch win19-legacy; do
    states=$(k get nodes -l "pool=$p" -o jsonpath='{range .items[*]}{.metadata.annotations.winpool\.dev/state}{"\n"}{end}' 2>/dev/null)
    c() { grep -cx "$1" <<<"$states" || true; }
    total=$(k get nodes -l "pool=$p" --no-headers 2>/dev/null | wc -l)
    pending=$((total - $(c Draining) - $(c Applying) - $(c Verifying) - $(c Updated) - $(c Failed)))
    printf '%-14s %8s %9s %9s %10s %8s %7s\n' "$p" "$pending" "$(c Draining)" "$(c Applying)" "$(c Verifying)" "$(c Updated)" "$(c Failed)"
  done
}
deadline=$(( $(date +%s) + ${WINPOOL_DEMO_TIMEOUT:-600} ))
while :; do
  show
  # Done when each pool is Ready with every one of its fleet's nodes Updated.
  done_pools=$(k get wnp -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.status.nodes.updated}/{.status.nodes.total}{"\n"}{end}' \
    | grep -cxE 'win22-web=True/6/6|win22-batch=True/6/6|win19-legacy=True/4/4' || true)
  [[ "$done_pools" -eq 3 ]] && break
  if [[ $(date +%s) -gt $deadline ]]; then
    log "the rollout did not finish in time; operator log: $STATE/operator.log"
    exit 1
  fi
  sleep 3
done
step ""
log "all three pools rolled out in $(($(date +%s) - demo_start))s:"
printf '%s\n' "${timings[@]}" >&2
cat <<EOM

Try next:
  export KUBECONFIG=$KUBECONFIG
  export PATH=$PLUGIN_DIR:\$PATH                      # the kubectl plugin the demo built: kubectl winpool
  $KUBECTL winpool status win22-web                  # each node's state, patch level, HNS and message
  $KUBECTL winpool plan win22-batch                  # what the next rounds would do
  $KUBECTL get wnp                                   # the pools, their target and progress
  $KUBECTL describe wnp win22-web                    # conditions and Events
  $KUBECTL get nodes -L winpool.dev/pool,winpool.dev/revision
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep ^winpool_pool
  $KUBECTL patch wnp win22-web --type merge -p '{"spec":{"os":{"patchLevel":"10.0.20348.2800"}}}'   # roll again
  tail -f $STATE/operator.log
  hack/demo.sh down                                  # stop everything
EOM
