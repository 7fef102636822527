#!/usr/bin/env bash
# The simulated Windows fleet: kwok nodes that look like Windows Server nodes,
# each running the real winpool agent (agent/) against a simulated machine,
# authenticated as the agent pod on that node, while the fleet plays the
# machine, the kubelet and kube-proxy's HNS. Builds agent/fleet/cmd/winpool-fleet
# when agent/ changed, then runs it with the arguments given:
#
#   hack/sim.sh [--nodes N] [--name-prefix P] [--labels k=v,...]
#               [--os ltsc2019|ltsc2022|ltsc2025] [--build 10.0.B.R]
#               [--containerd V[+vendor]] [--cni overlay|l2bridge]
#               [--apply-time D] [--download-time D] [--reboot-time D]
#               [--fail-rate F] [--seed N] [--fail-nodes a,b]
#               [--agent-namespace NS] [--no-create | --create-only]
#               [--hns auto|off|LB,EP] [--hns-sync-time D] [--hns-cost-scale X]
#               [--host-profile kind|aks|eks|onprem|onprem-wsus]
#               [--host-faults F[@node+node],...] [--stats-file PATH] [--latency-file PATH]
#               [--log-format text|json]
#   hack/sim.sh --build-only      build the fleet now (demos, CI) and print its path
#
# (hack/sim.sh --help describes each.) The cluster is the one in $KUBECONFIG,
# default the local control plane's (hack/cluster.sh kubeconfig); its kwok
# must run hack/kwok-stages.yaml, as hack/cluster.sh sets it up, or kwok
# overrides the NotReady of a reboot. The agent pods' ServiceAccount and RBAC
# come from the chart (hack/agent-identity.sh sets them up for a namespace).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# The binary is cached under a hash of what goes into it, so an unchanged
# agent/ starts at once and a changed one rebuilds exactly once, even when
# several fleets start together (tests do).
fleet_binary() {
  local hash bin
  hash="$(
    cd "$REPO_ROOT/agent"
    {
      go version
      # The image profiles are embedded (fleet/profiles/*.yaml); the fleet's
      # module (agent/fleet) builds the agent's packages, so both count.
      find . -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum -o -name '*.yaml' \) -print0 |
        LC_ALL=C sort -z | xargs -0 sha256sum
    } | sha256sum | cut -c1-16
  )"
  bin="$TOOLS_BIN/winpool-fleet-$hash"
  if [[ ! -x "$bin" ]]; then
    mkdir -p "$TOOLS_BIN"
    (
      flock 9
      if [[ ! -x "$bin" ]]; then
        log "building the simulated fleet (agent/fleet/cmd/winpool-fleet)"
        (cd "$REPO_ROOT/agent/fleet" && go build -trimpath -o "$bin.tmp" ./cmd/winpool-fleet)
        mv "$bin.tmp" "$bin"
        # Older builds are dead weight.
        find "$TOOLS_BIN" -maxdepth 1 -name 'winpool-fleet-*' ! -name "winpool-fleet-$hash" ! -name '*.lock' -delete
      fi
    ) 9>"$TOOLS_BIN/winpool-fleet.lock"
  fi
  echo "$bin"
}

BIN="$(fleet_binary)"
# `hack/sim.sh --build-only`: build (or find) the fleet and say where it is.
if [[ "${1:-}" == "--build-only" ]]; then
  echo "$BIN"
  exit 0
fi
if [[ -z "${KUBECONFIG:-}" ]]; then
  KUBECONFIG="$("$HACK_DIR/cluster.sh" kubeconfig 2>/dev/null)"
fi
export KUBECONFIG
exec "$BIN" "$@"
