#!/usr/bin/env bash
# Gives an agent namespace the identity the chart gives winpool's agents: the
# ServiceAccount winpool-agent, its ClusterRole/Role and bindings, and the
# ValidatingAdmissionPolicy that confines it to its own node's
# WindowsNodeReport. Rendered from charts/winpool (only those templates), so tests,
# the demo and the benchmark run the agents under exactly what users install.
#
#   hack/agent-identity.sh [--delete] <agent-namespace> [release-name]
#
# Applies to the cluster in $KUBECONFIG (default: hack/cluster.sh kubeconfig)
# with the locally built helm and kubectl. Creates the namespace, labelled
# pod-security.kubernetes.io/enforce=privileged, when it is missing.
# --delete removes what it applied (not the namespace).
#
# The release name only names the cluster-scoped objects (ClusterRole,
# ClusterRoleBinding, policy and binding). The default derives it from the
# namespace, so each agent namespace has its own and two never share them.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

usage() { die "usage: hack/agent-identity.sh [--delete] <agent-namespace> [release-name]"; }
DELETE=0
if [[ "${1:-}" == --delete ]]; then
  DELETE=1
  shift
fi
(($# >= 1 && $# <= 2)) || usage
NS="$1"
[[ "$NS" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ && ${#NS} -le 63 ]] || die "'$NS' is not a namespace name (a DNS label)"

# Helm release names are at most 53 characters. A name containing "winpool"
# is the chart's full name as is (see _helpers.tpl), so the objects are
# called <release>-agent...; a long namespace keeps a hash of the whole name
# to stay unique.
default_release() {
  local r="winpool-$1"
  if ((${#r} > 53)); then
    r="winpool-${1:0:35}"
    r="${r%-}-$(printf '%s' "$1" | sha256sum | cut -c1-8)"
  fi
  echo "$r"
}
RELEASE="${2:-$(default_release "$NS")}"

HELM_BIN="$(tool_path helm)"
KUBECTL_BIN="$(tool_path kubectl)"
[[ -x "$HELM_BIN" && -x "$KUBECTL_BIN" ]] || die "helm or kubectl missing; run hack/build-tools.sh"
if [[ -z "${KUBECONFIG:-}" ]]; then
  KUBECONFIG="$("$HACK_DIR/cluster.sh" kubeconfig)"
fi
export KUBECONFIG

# Helm keeps its own config, cache and data here, never in the user's home.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/winpool-agent-identity.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export HELM_CONFIG_HOME="$WORK/helm/config" HELM_CACHE_HOME="$WORK/helm/cache" HELM_DATA_HOME="$WORK/helm/data"

kubectl_() { "$KUBECTL_BIN" --request-timeout=30s "$@"; }

# `helm template` checks the chart's kubeVersion (>= 1.30) against this.
KUBE_VERSION="$(kubectl_ get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
[[ -n "$KUBE_VERSION" ]] || die "could not read the API server's version (KUBECONFIG=$KUBECONFIG)"

"$HELM_BIN" template "$RELEASE" charts/winpool \
  --namespace "$NS" \
  --kube-version "$KUBE_VERSION" \
  --set agentNamespace="$NS" \
  --set createAgentNamespace=false \
  --show-only templates/agent-serviceaccount.yaml \
  --show-only templates/agent-clusterrole.yaml \
  --show-only templates/agent-role.yaml \
  --show-only templates/agent-admission-policy.yaml \
  >"$WORK/identity.yaml"

if ((DELETE)); then
  kubectl_ delete --ignore-not-found -f "$WORK/identity.yaml"
  exit 0
fi

if ! kubectl_ get namespace "$NS" -o name >/dev/null 2>&1; then
  # Another process (the operator) may create it at the same moment.
  kubectl_ create namespace "$NS" 2>/dev/null || kubectl_ get namespace "$NS" -o name >/dev/null
fi
# The agents are HostProcess pods, which only "privileged" admits.
kubectl_ label --overwrite namespace "$NS" pod-security.kubernetes.io/enforce=privileged >/dev/null
kubectl_ apply -f "$WORK/identity.yaml"
