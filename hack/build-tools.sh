#!/usr/bin/env bash
# Builds the local control plane and tools from their Go modules into
# $WINPOOL_CACHE/bin (default ~/.cache/winpool/bin), each binary named with its
# version so a pin change rebuilds only what changed. Idempotent: a warm cache
# returns in well under a second. A cold build on 2 cores takes ~15-25 minutes.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mkdir -p "$TOOLS_BIN"

have() { [[ -x "$(tool_path "$1")" ]]; }

# Kubernetes stamps its version into the binaries with these ldflags (see
# hack/lib/version.sh upstream); /version, kubectl's skew warning and Helm's
# kubeVersion checks read them.
k8s_ldflags() {
  local v="$K8S_VERSION" major minor
  major="$(echo "${v#v}" | cut -d. -f1)"; minor="$(echo "${v#v}" | cut -d. -f2)"
  local date; date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local f=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    f+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=0000000000000000000000000000000000000000"
  done
  echo "-s -w$f"
}

build_kubernetes() {
  local missing=()
  for t in kube-apiserver kube-controller-manager kube-scheduler kubectl; do have "$t" || missing+=("$t"); done
  [[ ${#missing[@]} -eq 0 ]] && return
  log "building ${missing[*]} $K8S_VERSION from k8s.io/kubernetes (slow: ~10-20 min cold on 2 cores)"
  local out; out="$(mktemp -d)"
  for t in "${missing[@]}"; do
    log "  go build k8s.io/kubernetes/cmd/$t"
    (cd "$HACK_DIR/tools/kubernetes" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$out/$t" "k8s.io/kubernetes/cmd/$t")
    mv "$out/$t" "$(tool_path "$t")"
    log "  built $(tool_path "$t")"
  done
  rmdir "$out"
}

build_etcd() {
  have etcd && return
  log "building etcd $ETCD_VERSION"
  (cd "$HACK_DIR/tools/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$(tool_path etcd).tmp" go.etcd.io/etcd/server/v3)
  mv "$(tool_path etcd).tmp" "$(tool_path etcd)"
  log "  built $(tool_path etcd)"
}

# go install works for modules without replace directives.
build_installable() { # name module-path version
  local name="$1" pkg="$2" version="$3"
  have "$name" && return
  log "building $name $version ($pkg)"
  local gobin; gobin="$(mktemp -d)"
  GOBIN="$gobin" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "$pkg@$version"
  mv "$gobin/$(basename "$pkg")" "$(tool_path "$name")"
  rmdir "$gobin"
  log "  built $(tool_path "$name")"
}

ensure_promtool() {
  if command -v promtool >/dev/null && command -v prometheus >/dev/null; then return; fi
  log "installing Debian's prometheus (gives promtool)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # Debian's package starts a system service; the tests run their own.
  (systemctl stop prometheus 2>/dev/null; pkill -x prometheus 2>/dev/null) || true
}

# amtool checks the Alertmanager example in docs/notifications
# (hack/alerts-test.sh); Debian ships it with the Alertmanager.
ensure_amtool() {
  command -v amtool >/dev/null && return
  log "installing Debian's prometheus-alertmanager (gives amtool)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends prometheus-alertmanager >/dev/null
  # Debian's package starts a system service; the tests need only amtool.
  # A process name keeps 15 characters, which is what pkill -x matches.
  (systemctl stop prometheus-alertmanager 2>/dev/null; pkill -x prometheus-aler 2>/dev/null) || true
}

want="${*:-all}"
case "$want" in
  all)
    ensure_promtool
    ensure_amtool
    build_etcd
    build_installable kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
    build_installable kwokctl sigs.k8s.io/kwok/cmd/kwokctl "$KWOK_VERSION"
    build_installable helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
    build_installable actionlint github.com/rhysd/actionlint/cmd/actionlint "$ACTIONLINT_VERSION"
    build_kubernetes
    ;;
  # The demo needs the control plane, and Helm to render the agents'
  # identity from the chart as an install does; no linters or Prometheus.
  demo)
    build_installable helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
    build_etcd
    build_installable kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
    build_installable kwokctl sigs.k8s.io/kwok/cmd/kwokctl "$KWOK_VERSION"
    build_kubernetes
    ;;
  # The release workflow packages the chart and needs nothing else built.
  helm) build_installable helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" ;;
  *) die "usage: $0 [all|demo|helm]" ;;
esac
log "tools ready in $TOOLS_BIN"
