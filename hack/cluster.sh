#!/usr/bin/env bash
# The local control plane: real etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok as plain processes, started by `kwokctl --runtime
# binary` from the binaries hack/build-tools.sh built. Nothing is downloaded.
#
#   hack/cluster.sh up          start (idempotent) and wait until /readyz is ok
#   hack/cluster.sh down        stop every process of the cluster, delete its state
#   hack/cluster.sh kubeconfig  print the admin kubeconfig path
#   hack/cluster.sh status      print up/down; exit 0 only when up
#
# Environment:
#   WINPOOL_CLUSTER     cluster name (default winpool); one name, one cluster
#   WINPOOL_STATE       state root (default <repo>/.state, git-ignored);
#                       the cluster lives in $WINPOOL_STATE/clusters/<name>
#   WINPOOL_PORT_BASE   first of six consecutive loopback ports (default 26440):
#                       apiserver, etcd, etcd peer, controller-manager,
#                       scheduler, kwok. Each can also be set on its own:
#                       WINPOOL_APISERVER_PORT, WINPOOL_ETCD_PORT,
#                       WINPOOL_ETCD_PEER_PORT, WINPOOL_KCM_PORT,
#                       WINPOOL_SCHEDULER_PORT, WINPOOL_KWOK_PORT.
#                       A second cluster side by side needs another name and
#                       another base, e.g. WINPOOL_CLUSTER=b WINPOOL_PORT_BASE=26450.
#   WINPOOL_UP_TIMEOUT  seconds `up` waits for readiness (default 180)
#   WINPOOL_CP_API_QPS  client QPS of kube-controller-manager and kube-scheduler
#                       (burst twice that); unset = Kubernetes' defaults (20/30
#                       and 50/100). The benchmark raises it, as large clusters do.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CLUSTER="${WINPOOL_CLUSTER:-winpool}"
[[ "$CLUSTER" =~ ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ ]] || die "WINPOOL_CLUSTER must be a DNS label, got '$CLUSTER'"
STATE_ROOT="${WINPOOL_STATE:-$REPO_ROOT/.state}"
mkdir -p "$STATE_ROOT"
STATE_ROOT="$(cd "$STATE_ROOT" && pwd)" # kwokctl writes absolute paths into the kubeconfig

PORT_BASE="${WINPOOL_PORT_BASE:-26440}" # below Linux's ephemeral range (32768+), so clients never squat on it
APISERVER_PORT="${WINPOOL_APISERVER_PORT:-$PORT_BASE}"
ETCD_PORT="${WINPOOL_ETCD_PORT:-$((PORT_BASE + 1))}"
ETCD_PEER_PORT="${WINPOOL_ETCD_PEER_PORT:-$((PORT_BASE + 2))}"
KCM_PORT="${WINPOOL_KCM_PORT:-$((PORT_BASE + 3))}"
SCHEDULER_PORT="${WINPOOL_SCHEDULER_PORT:-$((PORT_BASE + 4))}"
KWOK_PORT="${WINPOOL_KWOK_PORT:-$((PORT_BASE + 5))}"
UP_TIMEOUT="${WINPOOL_UP_TIMEOUT:-180}"
CP_API_QPS="${WINPOOL_CP_API_QPS:-}"
[[ -z "$CP_API_QPS" || "$CP_API_QPS" =~ ^[0-9]+$ ]] || die "WINPOOL_CP_API_QPS must be a whole number, got '$CP_API_QPS'"

# kwokctl keeps each cluster in $KWOK_WORKDIR/clusters/<name>; pointing it at
# our state root also keeps it away from a user's ~/.kwok/kwok.yaml.
CLUSTER_DIR="$STATE_ROOT/clusters/$CLUSTER"
KUBECONFIG_PATH="$CLUSTER_DIR/kubeconfig.yaml"
AUDIT_LOG="$CLUSTER_DIR/logs/audit.log"
KWOKCTL_CONFIG="$STATE_ROOT/$CLUSTER.kwokctl.yaml"
KWOKCTL_LOG="$STATE_ROOT/$CLUSTER.kwokctl.log"
LOCK_FILE="$STATE_ROOT/$CLUSTER.lock"
# kwokctl prefers any `kubectl` on PATH for its own health checks; this
# directory puts ours first so a system kubectl (of another version, or a
# downloading dispatcher) is never used.
SHIM_DIR="$STATE_ROOT/bin"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok-controller)

kubectl_() { "$(tool_path kubectl)" --kubeconfig "$KUBECONFIG_PATH" --request-timeout=5s "$@"; }

# kwokctl reads KWOK_* variables over its config file (e.g. KWOK_KUBE_APISERVER_BINARY
# would swap in a download URL), so it runs with none but the work dir.
kwokctl_cmd() {
  KWOKCTL_CMD=(env)
  local v
  for v in $(compgen -e); do [[ "$v" == KWOK_* ]] && KWOKCTL_CMD+=(-u "$v"); done
  KWOKCTL_CMD+=(KWOK_WORKDIR="$STATE_ROOT" PATH="$SHIM_DIR:$PATH" "$(tool_path kwokctl)" --name "$CLUSTER" "$@")
}

# Components outlive kwokctl; fd 9 (our lock) must not leak into them or the
# lock would stay held by kube-apiserver forever.
kwokctl_() { kwokctl_cmd "$@"; "${KWOKCTL_CMD[@]}" </dev/null 9>&-; }

ensure_tools() {
  local t missing=0
  for t in etcd kwok kwokctl kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [[ -x "$(tool_path "$t")" ]] || missing=1
  done
  if ((missing)); then
    log "control-plane binaries missing; running hack/build-tools.sh (slow when cold)"
    "$HACK_DIR/build-tools.sh"
  fi
  mkdir -p "$SHIM_DIR"
  ln -sfn "$(tool_path kubectl)" "$SHIM_DIR/kubectl"
}

# kube-controller-manager and kube-scheduler give the API server 10 s to answer
# and exit for good otherwise; kwokctl starts them together with it and never
# restarts them (a kubelet or systemd would). On this 2-core machine, busy with
# a build, the API server has taken longer (about one cluster start in 40 failed
# with "kube-controller-manager exited while waiting for kube-apiserver /readyz").
# So kwokctl runs them through these shims, which start the real binary once
# the API server answers /readyz (anonymously, as probes read it). exec -a
# keeps the path under $CLUSTER_DIR/bin that kwokctl gave it, for cluster_pids.
START_SHIM_DIR="$STATE_ROOT/start-shims/$CLUSTER"
write_start_shims() { # apiserver-port
  local c
  mkdir -p "$START_SHIM_DIR"
  for c in kube-controller-manager kube-scheduler; do
    cat >"$START_SHIM_DIR/$c.tmp" <<EOF
#!/usr/bin/env bash
# Written by hack/cluster.sh: start $c once the API server is ready.
case " \$* " in *" --version "* | *" --help "*) exec -a "\$0" "$(tool_path "$c")" "\$@" ;; esac
for _ in \$(seq 1 600); do
  curl -ksf --max-time 2 "https://127.0.0.1:$1/readyz" >/dev/null 2>&1 && break
  sleep 0.5
done
exec -a "\$0" "$(tool_path "$c")" "\$@"
EOF
    chmod +x "$START_SHIM_DIR/$c.tmp"
    mv "$START_SHIM_DIR/$c.tmp" "$START_SHIM_DIR/$c"
  done
}

ready() { [[ -f "$KUBECONFIG_PATH" ]] && [[ "$(kubectl_ get --raw /readyz 2>/dev/null)" == ok ]]; }

# Every process kwokctl forks runs from a symlink in $CLUSTER_DIR/bin, so that
# path prefix identifies this cluster's processes and no other's.
cluster_pids() { pgrep -f "^$CLUSTER_DIR/bin/" || true; }

# Stops this cluster's processes that kwokctl no longer tracks (a pid file lost
# in a crash, a half-finished create): they still run from $CLUSTER_DIR/bin.
stop_leftovers() {
  local pids i
  pids="$(cluster_pids)"
  [[ -n "$pids" ]] || return 0
  log "stopping leftover processes of cluster '$CLUSTER': $(echo $pids)"
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null || true
  for i in $(seq 10); do [[ -z "$(cluster_pids)" ]] && return 0; sleep 0.5; done
  pids="$(cluster_pids)"
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null || true
  sleep 0.5
  pids="$(cluster_pids)"
  [[ -z "$pids" ]] || die "processes of cluster '$CLUSTER' still running: $(echo $pids)"
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# extraArgs entries for WINPOOL_CP_API_QPS (nothing when unset).
qps_args() {
  [[ -n "$CP_API_QPS" ]] || return 0
  printf '      - key: kube-api-qps\n        value: "%s"\n      - key: kube-api-burst\n        value: "%s"' "$CP_API_QPS" "$((CP_API_QPS * 2))"
}

write_kwokctl_config() {
  cat >"$KWOKCTL_CONFIG" <<EOF
# Generated by hack/cluster.sh; edits are overwritten on the next 'up'.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  runtime: binary
  kubeVersion: $K8S_VERSION
  # Loopback only: nothing on the network can reach the test cluster.
  bindAddress: 127.0.0.1
  securePort: true
  kubeAuthorization: true # RBAC (and Node) authorization
  kubeAdmission: true     # default admission plugins
  kubeAuditPolicy: $HACK_DIR/audit-policy.yaml
  quietPull: true
  # Exactly the control plane; no prometheus, dashboard, metrics-server, jaeger.
  components: [$(IFS=,; echo "${COMPONENTS[*]}")]
  kubeApiserverPort: $APISERVER_PORT
  etcdPort: $ETCD_PORT
  etcdPeerPort: $ETCD_PEER_PORT
  kubeControllerManagerPort: $KCM_PORT
  kubeSchedulerPort: $SCHEDULER_PORT
  kwokControllerPort: $KWOK_PORT
  # Local files only. kwokctl symlinks a local path instead of downloading it;
  # every other default here is a URL.
  etcdBinary: $(tool_path etcd)
  kubeApiserverBinary: $(tool_path kube-apiserver)
  kubeControllerManagerBinary: $START_SHIM_DIR/kube-controller-manager
  kubeSchedulerBinary: $START_SHIM_DIR/kube-scheduler
  kwokControllerBinary: $(tool_path kwok)
  kubectlBinary: $(tool_path kubectl)
componentsPatches:
  # kube-apiserver's default Service range is a /24: 254 ClusterIPs, fewer
  # than the HNS benchmark's 2,000 Services (issue 46). A /16 keeps 10.0.0.1,
  # the address kwokctl's certificate names, as the kubernetes Service's.
  - name: kube-apiserver
    extraArgs:
      - key: service-cluster-ip-range
        value: 10.0.0.0/16
  # kwokctl never restarts a component, and both of these exit when they lose
  # their leader lease, which a busy 2-core machine can cause during a
  # benchmark. Single instances need no election; without it they also keep
  # lease renewals out of the audit log.
  - name: kube-controller-manager
    extraArgs:
      - key: leader-elect
        value: "false"
$(qps_args)
  - name: kube-scheduler
    extraArgs:
      - key: leader-elect
        value: "false"
$(qps_args)
  # kwokctl's binary runtime makes kwok claim every node. Keep kwok to its own
  # default, nodes annotated kwok.x-k8s.io/node=fake, so a node a test drives
  # by itself is left alone.
  - name: kwok-controller
    extraArgs:
      - key: manage-all-nodes
        value: "false"
        override: true
      - key: manage-nodes-with-annotation-selector
        value: kwok.x-k8s.io/node=fake
---
EOF
  # kwok's stages, adapted so that the simulated fleet (hack/sim.sh) can play
  # the kubelet across a reboot; why, in the file.
  cat "$HACK_DIR/kwok-stages.yaml" >>"$KWOKCTL_CONFIG"
}

show_logs() {
  local f
  for f in "$KWOKCTL_LOG" "$CLUSTER_DIR"/logs/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kwok-controller}.log; do
    [[ -s "$f" ]] || continue
    printf '\n==> %s (last 25 lines) <==\n' "$f" >&2
    tail -n 25 "$f" >&2
  done
}

# Whether pid runs; a zombie (exited, not yet reaped by init) does not.
alive() { local st; st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)"; [[ -n "$st" && "$st" != Z ]]; }

# Components whose process is gone. kwokctl starts processes but never watches
# them, so a crash is only visible here. While kwokctl is still starting them,
# a component without a pid file is not dead yet, only not started.
dead_components() {
  local c pid dead=()
  for c in "${COMPONENTS[@]}"; do
    pid="$(cat "$CLUSTER_DIR/pids/$c.pid" 2>/dev/null || true)"
    if [[ -z "$pid" ]]; then
      [[ -n "${KWOKCTL_PID:-}" ]] || dead+=("$c")
    elif ! alive "$pid"; then
      dead+=("$c")
    fi
  done
  echo "${dead[*]}"
}

fail_up() {
  [[ -z "${KWOKCTL_PID:-}" ]] || kill "$KWOKCTL_PID" 2>/dev/null || true
  show_logs
  die "cluster '$CLUSTER': $* (logs above; all in $CLUSTER_DIR/logs and $KWOKCTL_LOG; 'hack/cluster.sh down' cleans up)"
}

# kwokctl itself waits (up to --timeout) for the apiserver to serve before it
# exits. It runs in the background so that our checks below notice at once
# when a component dies on start, instead of after the whole timeout.
kwokctl_bg() {
  kwokctl_cmd "$@"
  # A plain command, not a function, so that $! is kwokctl itself (env execs it).
  "${KWOKCTL_CMD[@]}" </dev/null >>"$KWOKCTL_LOG" 2>&1 9>&- &
  KWOKCTL_PID=$!
}

kwokctl_check() {
  [[ -n "${KWOKCTL_PID:-}" ]] && ! kill -0 "$KWOKCTL_PID" 2>/dev/null || return 0
  local rc=0
  wait "$KWOKCTL_PID" || rc=$?
  KWOKCTL_PID=""
  ((rc == 0)) || fail_up "kwokctl failed (exit $rc)"
}

wait_for() { # description command...
  local what="$1" dead; shift
  until "$@" >/dev/null 2>&1; do
    kwokctl_check
    dead="$(dead_components)"
    [[ -z "$dead" ]] || fail_up "$dead exited while waiting for $what"
    ((SECONDS < DEADLINE)) || fail_up "$what not ok after ${UP_TIMEOUT}s"
    sleep 0.5
  done
}

# The port a component of the existing cluster serves on, from the config
# kwokctl saved: the cluster may have been created with other WINPOOL_*_PORT
# values than this shell has.
component_port() {
  local key
  case "$1" in
    kube-apiserver) key=kubeApiserverPort ;;
    kube-controller-manager) key=kubeControllerManagerPort ;;
    kube-scheduler) key=kubeSchedulerPort ;;
    kwok-controller) key=kwokControllerPort ;;
  esac
  sed -n "s/^  $key: *//p" "$CLUSTER_DIR/kwok.yaml" | head -n 1
}

healthz() { # port
  curl -ksf --max-time 2 "https://127.0.0.1:$1/healthz" | grep -qx ok
}

cmd_up() {
  local start=$SECONDS
  ensure_tools
  exec 9>"$LOCK_FILE"
  flock 9
  DEADLINE=$((SECONDS + UP_TIMEOUT))
  if ready && [[ -z "$(dead_components)" ]]; then
    log "cluster '$CLUSTER' already up ($KUBECONFIG_PATH)"
    return
  fi

  if [[ -f "$CLUSTER_DIR/kwok.yaml" ]]; then
    # It exists but is not healthy (a component crashed, the machine
    # rebooted, ...). Restart every process: a process that is still shutting
    # down would otherwise count as running and never be restarted. The data in
    # etcd survives.
    log "cluster '$CLUSTER' exists but is not healthy (down: $(dead_components)); restarting it"
    kwokctl_ stop cluster >>"$KWOKCTL_LOG" 2>&1 || true
    stop_leftovers
    write_start_shims "$(component_port kube-apiserver)"
    kwokctl_bg start cluster --timeout "${UP_TIMEOUT}s"
  else
    # Leftovers of a crashed create would make kwokctl resume it.
    stop_leftovers
    rm -rf "$CLUSTER_DIR"
    # Fail early and clearly if another process holds one of our ports.
    local p
    for p in "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT"; do
      port_busy "$p" && die "port $p is in use; pick other ports with WINPOOL_PORT_BASE (now $PORT_BASE) or WINPOOL_*_PORT"
    done
    write_start_shims "$APISERVER_PORT"
    write_kwokctl_config
    log "creating cluster '$CLUSTER' (apiserver https://127.0.0.1:$APISERVER_PORT)"
    : >"$KWOKCTL_LOG"
    kwokctl_bg -c "$KWOKCTL_CONFIG" create cluster --kubeconfig "" --timeout "${UP_TIMEOUT}s"
  fi

  wait_for "kube-apiserver /readyz" ready
  # The rest of the control plane must work too before tests start: the
  # controller-manager creates the default ServiceAccount (pods need it), the
  # scheduler and kwok answer their health checks.
  wait_for "kube-controller-manager /healthz" healthz "$(component_port kube-controller-manager)"
  wait_for "kube-scheduler /healthz" healthz "$(component_port kube-scheduler)"
  wait_for "kwok-controller /healthz" healthz "$(component_port kwok-controller)"
  wait_for "default ServiceAccount" kubectl_ -n default get serviceaccount default
  # kwokctl exits once it sees the apiserver serve, which has happened by now.
  wait_for "kwokctl to finish" eval '[[ -z "$KWOKCTL_PID" ]]'
  log "cluster '$CLUSTER' ready in $((SECONDS - start))s; kubeconfig: $KUBECONFIG_PATH; audit log: $AUDIT_LOG"
}

cmd_down() {
  exec 9>"$LOCK_FILE"
  flock 9
  local pids
  pids="$(cluster_pids)"
  if [[ -f "$CLUSTER_DIR/kwok.yaml" ]]; then
    log "deleting cluster '$CLUSTER'"
    # `kwokctl delete cluster` is stop + rm, plus editing ~/.kube/config, which
    # we never touched; so stop and remove the directory ourselves.
    kwokctl_ stop cluster >>"$KWOKCTL_LOG" 2>&1 ||
      log "kwokctl stop cluster failed (see $KWOKCTL_LOG); cleaning up by hand"
  fi
  stop_leftovers
  # kwokctl's children are re-parented to init, which reaps them a moment
  # later; wait for that so `down && pgrep ...` sees nothing, not zombies.
  local pid deadline=$((SECONDS + 10))
  for pid in $pids; do
    while [[ -e "/proc/$pid" ]] && ((SECONDS < deadline)); do sleep 0.2; done
  done
  rm -rf "$CLUSTER_DIR" "$KWOKCTL_CONFIG"
  log "cluster '$CLUSTER' is down"
}

cmd_status() {
  local dead=""
  [[ ! -f "$CLUSTER_DIR/kwok.yaml" ]] || dead="$(dead_components)"
  if ready && [[ -z "$dead" ]]; then
    echo "up: cluster '$CLUSTER' at https://127.0.0.1:$(component_port kube-apiserver), kubeconfig $KUBECONFIG_PATH"
  elif [[ -n "$(cluster_pids)" ]]; then
    echo "unhealthy: cluster '$CLUSTER' (not running: ${dead:-none}; /readyz $(ready && echo ok || echo failing)); logs in $CLUSTER_DIR/logs"
    return 1
  else
    echo "down: cluster '$CLUSTER'"
    return 1
  fi
}

cmd_kubeconfig() {
  [[ -f "$KUBECONFIG_PATH" ]] || log "warning: cluster '$CLUSTER' is not up; run hack/cluster.sh up"
  echo "$KUBECONFIG_PATH"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  kubeconfig) cmd_kubeconfig ;;
  *) die "usage: $0 up|down|kubeconfig|status" ;;
esac
