#!/usr/bin/env bash
# Tests the Helm chart charts/winpool against the local control plane
# (hack/cluster.sh up must have run; this script does not start it):
#   1. its README is current (hack/chart-docs.py; the schema is written into the package);
#      `helm package` holds what the chart needs and renders as the directory does
#   2. helm lint --strict, with the defaults and with every optional part on
#   3. helm template is accepted by the real API server (kubectl apply
#      --dry-run=server) in a namespace that enforces Pod Security "restricted";
#      ServiceMonitor and PrometheusRule (no CRDs locally) only have to render,
#      with their values (digests, job, runbooks, disabled alerts) applied
#   3b. with global.image.registry every image is the mirror's, and
#      docs/air-gapped.md lists every image the chart runs
#   4. values.schema.json rejects wrong types and unknown keys, naming the key
#   5. the previous chart release is installed and upgraded to this chart: the
#      CRD is updated by `helm upgrade`; the operator's and the agent's
#      ServiceAccounts have exactly the access each needs (kubectl auth can-i;
#      what the agent's admission policy refuses is tested in
#      tests/agent_identity.rs, with a real agent token)
#   6. helm uninstall removes it and keeps the CRD
# Prints "N passed, M failed" last and exits 1 if anything failed.
#
#   hack/chart-test.sh                       the chart directory, charts/winpool
#   hack/chart-test.sh dist/winpool-V.tgz    a packaged chart (hack/release.sh):
#                                            every check runs on what it holds
#
# Environment: WINPOOL_CHART_TEST_RELEASE (default winpool-chart-test),
# WINPOOL_CHART_TEST_NAMESPACE (default winpool-system-chart-test),
# WINPOOL_CHART_TEST_AGENT_NAMESPACE (default winpool-agents-chart-test);
# WINPOOL_CHART_TEST_VERBOSE=1 shows the output of passing checks too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

CHART=charts/winpool
PACKAGE="${1:-}"
[[ -z "$PACKAGE" || -f "$PACKAGE" ]] || die "no chart package $PACKAGE"
# The chart directory's files/crds links to crds/, written from the types; a package holds its own.
[[ -n "$PACKAGE" ]] || write_crds
RELEASE="${WINPOOL_CHART_TEST_RELEASE:-winpool-chart-test}"
NS="${WINPOOL_CHART_TEST_NAMESPACE:-winpool-system-chart-test}"
AGENT_NS="${WINPOOL_CHART_TEST_AGENT_NAMESPACE:-winpool-agents-chart-test}"
HOOKS_NS="${WINPOOL_CHART_TEST_HOOKS_NAMESPACE:-winpool-hooks-chart-test}"
FULLNAME="$RELEASE" # the release name contains "winpool", so it is the chart's full name
SA="system:serviceaccount:$NS:$FULLNAME"
AGENT_SA="system:serviceaccount:$AGENT_NS:winpool-agent"

HELM_BIN="$(tool_path helm)"
KUBECTL_BIN="$(tool_path kubectl)"
[[ -x "$HELM_BIN" && -x "$KUBECTL_BIN" ]] || die "helm or kubectl missing; run hack/build-tools.sh"
"$HACK_DIR/cluster.sh" status >/dev/null || die "the local control plane is not up; run hack/cluster.sh up"
export KUBECONFIG
KUBECONFIG="$("$HACK_DIR/cluster.sh" kubeconfig)"

# Helm keeps its own config, cache and data here, never in the user's home.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/winpool-chart-test.XXXXXX")"
export HELM_CONFIG_HOME="$WORK/helm/config" HELM_CACHE_HOME="$WORK/helm/cache" HELM_DATA_HOME="$WORK/helm/data"
# A packaged chart is tested as unpacked: what a user installs, nothing else.
if [[ -n "$PACKAGE" ]]; then
  mkdir -p "$WORK/packaged"
  tar -xzf "$PACKAGE" -C "$WORK/packaged"
  CHART="$WORK/packaged/winpool"
  [[ -f "$CHART/Chart.yaml" ]] || die "$PACKAGE holds no winpool/Chart.yaml"
  log "testing the packaged chart $PACKAGE"
else
  # The schema and the dashboard are build outputs (hack/release.sh writes them into the package).
  python3 "$HACK_DIR/chart-docs.py" --schema "$CHART"
  python3 "$HACK_DIR/dashboard.py" "$CHART/files/dashboard.json"
fi

helm_() { "$HELM_BIN" "$@"; }
kubectl_() { "$KUBECTL_BIN" "$@"; }

PASSED=0
FAILED=0
FAILURES=()
# check NAME COMMAND...: runs COMMAND, its output kept in $WORK/out and shown on failure.
check() {
  local name="$1"
  shift
  if "$@" >"$WORK/out" 2>&1; then
    PASSED=$((PASSED + 1))
    printf 'ok   %s\n' "$name"
    [[ -z "${WINPOOL_CHART_TEST_VERBOSE:-}" ]] || sed 's/^/     | /' "$WORK/out"
  else
    FAILED=$((FAILED + 1))
    FAILURES+=("$name")
    printf 'FAIL %s\n' "$name"
    sed 's/^/     | /' "$WORK/out" | tail -n 40
  fi
}

# The release's cluster-scoped objects and namespaces, however far a previous
# run got.
remove_all() {
  helm_ uninstall "$RELEASE" -n "$NS" --wait --timeout 120s >/dev/null 2>&1 || true
  kubectl_ delete clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding \
    -l "app.kubernetes.io/instance=$RELEASE" --ignore-not-found >/dev/null 2>&1 || true
  kubectl_ -n default delete role,rolebinding -l "app.kubernetes.io/instance=$RELEASE" --ignore-not-found >/dev/null 2>&1 || true
  kubectl_ delete namespace "$NS" "$AGENT_NS" --ignore-not-found --wait=true --timeout=120s >/dev/null 2>&1 || true
}
cleanup() {
  local rc=$?
  remove_all
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

# `helm template` checks the chart's kubeVersion against this; the default
# (without a cluster) is far older than any cluster winpool supports.
KUBE_VERSION="$(kubectl_ get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
[[ -n "$KUBE_VERSION" ]] || die "could not read the API server's version"

ALL_OPTIONAL=(--set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set networkPolicy.enabled=true)
template() { helm_ template "$RELEASE" "$CHART" --namespace "$NS" --kube-version "$KUBE_VERSION" "$@"; }

log "chart test: release $RELEASE, namespace $NS, agent namespace $AGENT_NS, Kubernetes $KUBE_VERSION"
remove_all
# The release namespace enforces (and warns about) Pod Security "restricted",
# so a Deployment or pod that falls short is refused here, as on a hardened
# cluster.
kubectl_ create namespace "$NS" >/dev/null
kubectl_ label namespace "$NS" >/dev/null \
  pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted

# ---- 1. generated files and the package ---------------------------------------
check "chart README.md generated from values.yaml is current" python3 hack/chart-docs.py --check
package_complete() {
  helm_ package "$CHART" --destination "$WORK/package" || return 1
  local version tgz f rc=0
  version="$(sed -n 's/^version: *//p' "$CHART/Chart.yaml")"
  tgz="$WORK/package/winpool-$version.tgz"
  [[ -f "$tgz" ]] || { echo "no $tgz"; return 1; }
  tar -tzf "$tgz" | sed 's|^winpool/||' | sort >"$WORK/package.list"
  # files/crds is a link to crds/ in the repository: the package holds the files.
  for f in Chart.yaml values.yaml values.schema.json README.md templates/crds.yaml templates/NOTES.txt \
    files/crds/windowsnodepools.winpool.dev.yaml files/crds/windowsnodereports.winpool.dev.yaml files/crds/windowsnodeoperations.winpool.dev.yaml files/alerts.yaml files/dashboard.json; do
    grep -qx "$f" "$WORK/package.list" || { echo "the package lacks $f"; rc=1; }
  done
  if grep -E '\.in$|\.py$' "$WORK/package.list"; then echo "the package holds build inputs"; rc=1; fi
  # Rendered from the package, with every optional part: nothing outside it is needed.
  helm_ template "$RELEASE" "$tgz" --namespace "$NS" --kube-version "$KUBE_VERSION" "${ALL_OPTIONAL[@]}" >"$WORK/from-package.yaml" || return 1
  template "${ALL_OPTIONAL[@]}" >"$WORK/from-dir.yaml" || return 1
  diff -u "$WORK/from-dir.yaml" "$WORK/from-package.yaml" >/dev/null || { echo "the package renders differently from the directory"; rc=1; }
  return "$rc"
}
notes_stand_alone() {
  helm_ install "$RELEASE" "$CHART" --namespace "$NS" --dry-run=server --set agentNamespace="$AGENT_NS" --set crds.enabled=false >"$WORK/notes.txt" 2>&1 || { cat "$WORK/notes.txt"; return 1; }
  sed -n '/^NOTES:/,$p' "$WORK/notes.txt"
  ! sed -n '/^NOTES:/,$p' "$WORK/notes.txt" | grep -nE '(^|[ (])(examples|docs|hack)/'
}
check "helm package holds the chart and renders as the directory does" package_complete
check "NOTES.txt points at nothing outside the chart" notes_stand_alone
# The first pool the NOTES teach is the safe path: paused, its plan, then resume.
notes_teach_a_paused_pilot() {
  grep -q 'winpool.dev/paused: "true"' "$CHART/templates/NOTES.txt" && grep -q 'kubectl winpool plan' "$CHART/templates/NOTES.txt" \
    && grep -q 'kubectl winpool resume' "$CHART/templates/NOTES.txt"
}
check "NOTES.txt teaches a paused pilot, its plan, then resume" notes_teach_a_paused_pilot

# ---- 2. lint -----------------------------------------------------------------
check "helm lint --strict (defaults)" helm_ lint --strict "$CHART"
check "helm lint --strict (all optional parts on)" helm_ lint --strict "$CHART" "${ALL_OPTIONAL[@]}"

# ---- 3. the API server accepts the rendered manifests ------------------------
# Everything except ServiceMonitor/PrometheusRule, whose CRDs the local cluster
# does not have. Server-side dry-run persists nothing, so a namespace the
# manifests create cannot hold their other objects in the same run: here the
# agent namespace is the release namespace (it exists), and its Namespace
# object is applied as a dry-run change to it.
dry_run_server() {
  template --set grafanaDashboard.enabled=true --set networkPolicy.enabled=true --set createAgentNamespace=true --set agentNamespace="$NS" \
    >"$WORK/rendered.yaml" || return 1
  local kinds
  kinds="$(grep -c '^kind:' "$WORK/rendered.yaml")"
  echo "applying $kinds objects with --dry-run=server"
  kubectl_ apply --dry-run=server -f "$WORK/rendered.yaml" 2>&1 | tee "$WORK/apply.log"
  [[ "${PIPESTATUS[0]}" == 0 ]]
}
check "helm template | kubectl apply --dry-run=server" dry_run_server
no_psa_warnings() {
  if grep -i 'violate PodSecurity' "$WORK/apply.log"; then
    echo "the Deployment's pod template does not meet Pod Security \"restricted\""
    return 1
  fi
  grep -q 'deployment.apps/.* (server dry run)' "$WORK/apply.log" || { echo "no Deployment in the dry run"; return 1; }
}
check "Deployment passes Pod Security restricted (no warnings)" no_psa_warnings

renders_kind() { # KIND TEMPLATE SET...
  local kind="$1" tpl="$2"
  shift 2
  template --show-only "templates/$tpl" "$@" >"$WORK/one.yaml" || return 1
  cat "$WORK/one.yaml"
  grep -qx "kind: $kind" "$WORK/one.yaml"
}
# The CRDs are crds/ as generated (files/crds links there), with the
# release's labels and Argo CD's sync options beside Helm's keep.
crds_render() {
  template --show-only templates/crds.yaml --set-string 'crds.annotations.argocd\.argoproj\.io/sync-options=Prune=false' >"$WORK/crds.yaml" || return 1
  python3 - "$WORK/crds.yaml" "$REPO_ROOT/crds" "$RELEASE" <<'PY'
import pathlib, sys, yaml
rendered = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
generated = {p.stem: yaml.safe_load(p.read_text()) for p in pathlib.Path(sys.argv[2]).glob("*.yaml")}
bad = [f"rendered {sorted(rendered)} != crds/ {sorted(generated)}"] if rendered.keys() != generated.keys() else []
want = {"argocd.argoproj.io/sync-options": "Prune=false", "helm.sh/resource-policy": "keep"}
for name, crd in rendered.items():
    meta = crd["metadata"]
    if meta.pop("annotations", None) != want:
        bad.append(f"{name}: annotations are not {want!r}")
    if meta.pop("labels", {}).get("app.kubernetes.io/instance") != sys.argv[3]:
        bad.append(f"{name}: not labelled with the release")
    if crd != generated.get(name, crd):
        bad.append(f"{name} differs from crds/{name}.yaml")
print("\n".join(bad) or f"rendered as in crds/: {', '.join(sorted(rendered))}")
sys.exit(1 if bad else 0)
PY
}
check "the CRDs render from crds/, with crds.annotations beside crds.keep" crds_render
check "ServiceMonitor renders (serviceMonitor.enabled)" \
  renders_kind ServiceMonitor servicemonitor.yaml --set serviceMonitor.enabled=true
# The scrape options reach the ServiceMonitor and the PodMonitor alike, after
# the job relabeling the alerts rely on; both at once are refused.
monitors_follow_values() {
  local sets=(--set serviceMonitor.namespace=monitoring --set serviceMonitor.honorLabels=true
    --set serviceMonitor.scheme=https --set serviceMonitor.tlsConfig.serverName=winpool.example
    --set 'serviceMonitor.relabelings[0].targetLabel=cluster' --set 'serviceMonitor.relabelings[0].replacement=prod-1'
    --set 'serviceMonitor.metricRelabelings[0].action=drop' --set 'serviceMonitor.metricRelabelings[0].regex=go_.*')
  local kind tpl on rc=0
  for kind in ServiceMonitor PodMonitor; do
    if [[ $kind == ServiceMonitor ]]; then tpl=servicemonitor.yaml on=serviceMonitor.enabled=true; else tpl=podmonitor.yaml on=serviceMonitor.podMonitor=true; fi
    renders_kind "$kind" "$tpl" --set "$on" "${sets[@]}" >/dev/null || { echo "$kind does not render"; rc=1; continue; }
    python3 - "$WORK/one.yaml" "$kind" <<'PY' || rc=1
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
ep = (d["spec"].get("endpoints") or d["spec"].get("podMetricsEndpoints"))[0]
want = [
    (d["metadata"]["namespace"], "monitoring"),
    ([r.get("targetLabel") for r in ep["relabelings"]], ["job", "cluster"]),
    (ep.get("metricRelabelings"), [{"action": "drop", "regex": "go_.*"}]),
    ((ep.get("honorLabels"), ep.get("scheme"), ep.get("tlsConfig")), (True, "https", {"serverName": "winpool.example"})),
]
bad = [f"{sys.argv[2]}: {got!r} != {exp!r}" for got, exp in want if got != exp]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
  done
  if template --set serviceMonitor.enabled=true --set serviceMonitor.podMonitor=true >/dev/null 2>"$WORK/err"; then
    echo "a ServiceMonitor and a PodMonitor at once were not refused"; rc=1
  fi
  grep -q "choose one" "$WORK/err" || { cat "$WORK/err"; rc=1; }
  return "$rc"
}
check "ServiceMonitor and PodMonitor: namespace, honorLabels, scheme, tlsConfig, relabelings; not both" monitors_follow_values
rules_render() {
  renders_kind PrometheusRule prometheusrule.yaml --set prometheusRule.enabled=true >/dev/null || return 1
  local want got
  want="$(grep -cE '^ *- *alert:' "$CHART/files/alerts.yaml" || true)"
  got="$(grep -cE '^ *- *alert:' "$WORK/one.yaml" || true)"
  echo "files/alerts.yaml has $want alerts, the PrometheusRule $got"
  [[ "$want" == "$got" ]]
}
check "PrometheusRule renders every rule of files/alerts.yaml" rules_render
rules_follow_values() {
  renders_kind PrometheusRule prometheusrule.yaml --set prometheusRule.enabled=true \
    --set prometheusRule.disabled.WinpoolNoLeader=true --set prometheusRule.job=ops-winpool \
    --set prometheusRule.runbookUrl=https://runbooks.example/winpool \
    --set prometheusRule.additionalRuleLabels.team=windows >/dev/null || return 1
  local want got rc=0
  want="$(($(grep -cE '^ *- *alert:' "$CHART/files/alerts.yaml") - 1))"
  got="$(grep -cE '^ *- *alert:' "$WORK/one.yaml" || true)"
  echo "alerts rendered: $got (want $want)"
  [[ "$got" == "$want" ]] || rc=1
  if grep -n 'alert: WinpoolNoLeader' "$WORK/one.yaml"; then echo "a disabled alert was rendered"; rc=1; fi
  if grep -n 'job="winpool"' "$WORK/one.yaml"; then echo "the job selector was not replaced"; rc=1; fi
  grep -q 'up{job="ops-winpool"}' "$WORK/one.yaml" || { echo "no up{job=\"ops-winpool\"}"; rc=1; }
  [[ "$(grep -c 'runbook_url: https://runbooks.example/winpool#' "$WORK/one.yaml")" == "$want" ]] || { echo "runbook_url not on every alert"; rc=1; }
  grep -q 'runbook_url: https://runbooks.example/winpool#winpooloperatordown$' "$WORK/one.yaml" || { echo "anchor is not the lower-case alert name"; rc=1; }
  [[ "$(grep -c 'team: windows' "$WORK/one.yaml")" == "$want" ]] || { echo "additionalRuleLabels not on every alert"; rc=1; }
  return "$rc"
}
check "PrometheusRule: disabled alerts, job, runbookUrl, additionalRuleLabels" rules_follow_values
DIGEST="sha256:$(printf '0123456789abcdef%.0s' 1 2 3 4)"
images_render() {
  local rc=0 app
  app="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART/Chart.yaml")"
  template --show-only templates/deployment.yaml >"$WORK/tag.yaml" || return 1
  grep -q "image: \"ghcr.io/winpool/winpool:$app\"" "$WORK/tag.yaml" || { echo "default operator image is not ghcr.io/winpool/winpool:$app"; rc=1; }
  # A released chart names the agent (SYSTEM on every node) by the digest
  # hack/release.sh built it with; the chart's source by its appVersion tag.
  local pinned
  pinned="$(sed -n 's/^    digest: "\(sha256:[0-9a-f]\{64\}\)"$/\1/p' "$CHART/values.yaml")"
  # Released beside its agent image: pinned, to that image's manifest.
  local agent_archive
  agent_archive="$(dirname "${PACKAGE:-/nonexistent/x}")/winpool-agent-$app.oci.tar"
  if [[ -f "$agent_archive" ]]; then
    local built
    built="$(python3 -c 'import json,sys,tarfile; print(json.load(tarfile.open(sys.argv[1]).extractfile("index.json"))["manifests"][0]["digest"])' "$agent_archive")"
    [[ "$pinned" == "$built" ]] || { echo "the released chart pins the agent to '$pinned', not to the image built with it ($built)"; rc=1; }
  fi
  if [[ -n "$pinned" ]]; then
    grep -q -- "--agent-image=ghcr.io/winpool/agent@$pinned\$" "$WORK/tag.yaml" || { echo "default agent image is not ghcr.io/winpool/agent@$pinned"; rc=1; }
  else
    grep -q -- "--agent-image=ghcr.io/winpool/agent:$app\$" "$WORK/tag.yaml" || { echo "default agent image is not ghcr.io/winpool/agent:$app"; rc=1; }
  fi
  template --show-only templates/deployment.yaml --set image.digest="$DIGEST" --set image.tag=9.9.9 \
    --set agent.image.digest="$DIGEST" --set agent.image.registry=registry.example:5000 >"$WORK/digest.yaml" || return 1
  grep -n 'image: \|--agent-image' "$WORK/digest.yaml"
  grep -q "image: \"ghcr.io/winpool/winpool@$DIGEST\"" "$WORK/digest.yaml" || { echo "the operator digest does not win over the tag"; rc=1; }
  grep -q -- "--agent-image=registry.example:5000/winpool/agent@$DIGEST\$" "$WORK/digest.yaml" || { echo "the agent digest is not used"; rc=1; }
  return "$rc"
}
check "images: appVersion tag by default (a released chart: the agent's digest), the digest wins when set" images_render
extras_render() {
  template --show-only templates/deployment.yaml --set 'extraArgs[0]=--agent-max-attempts=5' \
    --set 'extraEnv[0].name=HTTPS_PROXY' --set 'extraEnv[0].value=http://proxy:3128' --set commonLabels.team=windows \
    >"$WORK/extras.yaml" || return 1
  local rc=0
  grep -q -- '- --agent-max-attempts=5$' "$WORK/extras.yaml" || { echo "extraArgs missing"; rc=1; }
  grep -A1 'name: HTTPS_PROXY' "$WORK/extras.yaml" | grep -q 'value: http://proxy:3128' || { echo "extraEnv missing"; rc=1; }
  [[ "$(grep -c 'team: windows' "$WORK/extras.yaml")" == 2 ]] || { echo "commonLabels not on the Deployment and its pods"; rc=1; }
  return "$rc"
}
check "extraArgs, extraEnv and commonLabels reach the Deployment" extras_render
# A CA bundle mounted for https gates (docs/OPERATIONS.md), and the
# Deployment's own annotations and strategy; the API server takes them.
mounts_render() {
  local sets=(--set 'extraVolumes[0].name=corp-ca' --set 'extraVolumes[0].configMap.name=corp-ca'
    --set 'extraVolumeMounts[0].name=corp-ca' --set 'extraVolumeMounts[0].mountPath=/etc/corp-ca' --set 'extraVolumeMounts[0].readOnly=true'
    --set 'extraEnv[0].name=SSL_CERT_FILE' --set 'extraEnv[0].value=/etc/corp-ca/ca.crt'
    --set-string 'deploymentAnnotations.reloader\.stakater\.com/auto=true' --set strategy.type=Recreate)
  template --show-only templates/deployment.yaml "${sets[@]}" >"$WORK/mounts.yaml" || return 1
  python3 - "$WORK/mounts.yaml" <<'PY' || return 1
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
pod = d["spec"]["template"]["spec"]
c = pod["containers"][0]
want = [
    (d["metadata"].get("annotations"), {"reloader.stakater.com/auto": "true"}),
    (d["spec"].get("strategy"), {"type": "Recreate"}),
    (pod.get("volumes"), [{"name": "corp-ca", "configMap": {"name": "corp-ca"}}]),
    (c.get("volumeMounts"), [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}]),
]
bad = [f"{got!r} != {exp!r}" for got, exp in want if got != exp]
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
  kubectl_ apply --dry-run=server -n "$NS" -f "$WORK/mounts.yaml"
}
check "extraVolumes, extraVolumeMounts, deploymentAnnotations and strategy reach the Deployment" mounts_render
json_valid() {
  if command -v jq >/dev/null; then jq empty "$1"; else python3 -m json.tool "$1" >/dev/null; fi
}
dashboard_renders() {
  json_valid "$CHART/files/dashboard.json" || { echo "files/dashboard.json is not valid JSON"; return 1; }
  renders_kind ConfigMap grafana-dashboard.yaml --set grafanaDashboard.enabled=true >/dev/null || return 1
  grep -q 'grafana_dashboard: "1"' "$WORK/one.yaml" || { echo "no grafana_dashboard label"; return 1; }
}
check "Grafana dashboard is valid JSON in a labelled ConfigMap" dashboard_renders
no_ha_without_leader() {
  ! template --set leaderElection.enabled=false --set replicaCount=2 >/dev/null 2>"$WORK/err" || return 1
  cat "$WORK/err"
  grep -q 'replicaCount' "$WORK/err"
}
check "leaderElection.enabled=false with 2 replicas is refused" no_ha_without_leader
# The operator's PodDisruptionBudget: maxUnavailable by default, minAvailable when set.
pdb_min_available() {
  template --show-only templates/poddisruptionbudget.yaml --set podDisruptionBudget.minAvailable=1 >"$WORK/pdb.yaml" || return 1
  grep -q '^  minAvailable: 1$' "$WORK/pdb.yaml" && ! grep -q 'maxUnavailable' "$WORK/pdb.yaml"
}
check "PodDisruptionBudget takes minAvailable instead of maxUnavailable when set" pdb_min_available
# hnsAdmission: its policy reads the pools as parameters, and the API server
# accepts both objects as rendered (Warn by default, Deny when asked).
hns_admission_renders() {
  template --show-only templates/hns-admission-policy.yaml --set hnsAdmission.enabled=true --set hnsAdmission.action=Deny \
    --set 'hnsAdmission.poolSelector.matchLabels.tier=prod' >"$WORK/hns-admission.yaml" || return 1
  grep -q 'kind: WindowsNodePool' "$WORK/hns-admission.yaml" && grep -q 'validationActions: \[Deny\]' "$WORK/hns-admission.yaml" \
    && grep -q 'tier: prod' "$WORK/hns-admission.yaml" || return 1
  kubectl_ apply --dry-run=server -f "$WORK/hns-admission.yaml"
}
check "hnsAdmission renders a policy over the pools that the API server accepts" hns_admission_renders
# Health gate credentials: a Role in the release namespace, narrowed to the
# listed Secrets when rbac.healthGateSecrets names them.
gate_secrets_narrowed() {
  renders_kind Role role-secrets.yaml --set 'rbac.healthGateSecrets[0]=prometheus-auth' >/dev/null || return 1
  cat "$WORK/one.yaml"
  grep -q 'resourceNames: \["prometheus-auth"\]' "$WORK/one.yaml" && grep -q "namespace: $NS" "$WORK/one.yaml" \
    && ! grep -q 'kind: ClusterRole' "$WORK/one.yaml"
}
check "health gate Secrets: a Role in the release namespace, narrowed by rbac.healthGateSecrets" gate_secrets_narrowed
# The agent's identity does not depend on who creates its namespace.
agent_identity_renders() {
  template --set createAgentNamespace=false --set agentNamespace="$AGENT_NS" >"$WORK/rendered.yaml" || return 1
  local want rc=0
  for want in "ServiceAccount winpool-agent" "ClusterRole $FULLNAME-agent" "ClusterRoleBinding $FULLNAME-agent" \
    "Role $FULLNAME-agent" "RoleBinding $FULLNAME-agent" "Role $FULLNAME-agent-events" "RoleBinding $FULLNAME-agent-events" \
    "ValidatingAdmissionPolicy $FULLNAME-agent-own-report" "ValidatingAdmissionPolicyBinding $FULLNAME-agent-own-report" \
    "ValidatingAdmissionPolicy $FULLNAME-agent-own-events" "ValidatingAdmissionPolicyBinding $FULLNAME-agent-own-events" \
    "ValidatingAdmissionPolicy $FULLNAME-pool-operator-pause-only" "ValidatingAdmissionPolicyBinding $FULLNAME-pool-operator-pause-only"; do
    if awk -v kind="${want%% *}" -v name="${want#* }" '
      /^---/ { k = ""; n = "" }
      /^kind: / { k = $2 }
      /^  name: / { if (n == "") n = $2 }
      k == kind && n == name { found = 1 }
      END { exit !found }' "$WORK/rendered.yaml"; then
      echo "rendered: $want"
    else
      echo "missing: $want"
      rc=1
    fi
  done
  if grep -qx 'kind: Namespace' "$WORK/rendered.yaml"; then
    echo "a Namespace was rendered although createAgentNamespace=false"
    rc=1
  fi
  return "$rc"
}
check "agent identity renders with createAgentNamespace=false" agent_identity_renders

# ---- air-gapped: one registry for every image, as docs/air-gapped.md lists -----
# images FILE: every image the rendered chart's containers run or have the
# operator run (their --*-image and --*-repository flags), one a line.
images() {
  python3 - "$1" <<'PY'
import re, sys, yaml
def containers(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from v if k in ("containers", "initContainers") and isinstance(v, list) else containers(v)
    elif isinstance(node, list):
        for v in node:
            yield from containers(v)
refs = set()
for c in (c for d in yaml.safe_load_all(open(sys.argv[1])) for c in containers(d)):
    refs.add(c["image"])
    refs.update(m[1] for m in (re.fullmatch(r"--[a-z-]+-(?:image|repository)=(.+)", a) for a in c.get("args", [])) if m)
print("\n".join(sorted(refs)))
PY
}
# The images by default, as docs/air-gapped.md writes them: the chart's
# appVersion as <version>, the agent by tag (the release pins its digest).
default_images() {
  local version
  version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART/Chart.yaml")"
  template "${ALL_OPTIONAL[@]}" --set agent.image.digest= >"$WORK/default-images.yaml" || return 1
  images "$WORK/default-images.yaml" | sed "s/:$version\$/:<version>/"
}
every_image_mirrored() {
  local want got rc=0
  want="$(default_images | wc -l)"
  template "${ALL_OPTIONAL[@]}" --set global.image.registry=mirror.example --set 'global.imagePullSecrets[0].name=mirror' \
    --set 'agent.imagePullSecrets[0].name=agents' >"$WORK/mirrored.yaml" || return 1
  images "$WORK/mirrored.yaml" | tee "$WORK/mirrored.list"
  got="$(grep -c '^mirror\.example/' "$WORK/mirrored.list")"
  [[ "$got" == "$want" && "$(wc -l <"$WORK/mirrored.list")" == "$want" ]] \
    || { echo "$got of $(wc -l <"$WORK/mirrored.list") images start with mirror.example/; the chart runs $want"; rc=1; }
  python3 - "$WORK/mirrored.yaml" <<'PY' || rc=1
import sys, yaml
dep = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Deployment")
pod = dep["spec"]["template"]["spec"]
bad = []
if pod.get("imagePullSecrets") != [{"name": "mirror"}]:
    bad.append(f"operator pods' imagePullSecrets {pod.get('imagePullSecrets')!r} != [mirror]")
if "--agent-image-pull-secrets=mirror,agents" not in pod["containers"][0]["args"]:
    bad.append("the operator is not given --agent-image-pull-secrets=mirror,agents")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
  return "$rc"
}
check "global.image.registry prefixes every image, global.imagePullSecrets reach every pull" every_image_mirrored
air_gapped_page_lists_every_image() {
  default_images >"$WORK/images.chart" || return 1
  sed -n '/^## Images to mirror/,/^## /{s/^| `\([^`]*\)` |.*/\1/p}' docs/air-gapped.md | sort >"$WORK/images.page"
  diff -u --label docs/air-gapped.md --label "the chart" "$WORK/images.page" "$WORK/images.chart"
}
check "docs/air-gapped.md lists every image the chart runs, and no other" air_gapped_page_lists_every_image

# ---- 4. values.schema.json ---------------------------------------------------
schema_rejects() { # WHAT-THE-ERROR-NAMES SET...
  local want="$1"
  shift
  if template "$@" >/dev/null 2>"$WORK/err"; then
    echo "rendered although $* is invalid"
    return 1
  fi
  cat "$WORK/err"
  grep -q "$want" "$WORK/err"
}
check "schema rejects replicaCount=two, naming replicaCount" schema_rejects replicaCount --set replicaCount=two
check "schema rejects an unknown top-level key" schema_rejects replicaCont --set replicaCont=2
check "schema rejects a wrong nested type (image.pullPolicy)" schema_rejects pullPolicy --set image.pullPolicy=Sometimes
check "schema rejects a digest that is not sha256:<hex>" schema_rejects digest --set image.digest=latest
check "schema rejects disabling an alert that does not exist" schema_rejects NoSuchAlert --set prometheusRule.disabled.NoSuchAlert=true
check "schema types resources (requests.cpu=a lot)" schema_rejects resources --set 'resources.requests.cpu=a lot'
check "schema types securityContext (runAsNonRoot=maybe)" schema_rejects runAsNonRoot --set securityContext.runAsNonRoot=maybe
for ns in "$NS" "$AGENT_NS" kube-system default; do
  check "the chart refuses hooks.namespace=$ns (hook Jobs would run as its accounts)" \
    schema_rejects "hooks.namespace \"$ns\"" --set hooks.namespace="$ns" --set agentNamespace="$AGENT_NS"
done

# ---- 5. install the previous release, upgrade to this chart ---------------------
# The chart as released before the CRD became a template (0.1.0, CRD under
# crds/, which Helm installs once and never upgrades).
PREVIOUS_CHART_REVISION=ae035b9bb7db4eeb4e58ac07868d2c112b41c766
CRD=customresourcedefinition/windowsnodepools.winpool.dev
install_previous() {
  mkdir -p "$WORK/previous"
  git -C "$REPO_ROOT" archive "$PREVIOUS_CHART_REVISION" charts/winpool | tar -x -C "$WORK/previous" \
    || { echo "cannot read chart revision $PREVIOUS_CHART_REVISION (a shallow clone?)"; return 1; }
  # The cluster's CRD as that release left it (the test suite installed a newer one),
  # and no report or operation CRD: that release had neither (the test suite installed them).
  kubectl_ apply --server-side --force-conflicts -f "$WORK/previous/charts/winpool/crds/" || return 1
  kubectl_ delete crd windowsnodereports.winpool.dev windowsnodeoperations.winpool.dev --ignore-not-found --wait=true || return 1
  helm_ install "$RELEASE" "$WORK/previous/charts/winpool" --namespace "$NS" --set agentNamespace="$AGENT_NS" --timeout 120s
}
check "helm install of the previous chart release (0.1.0)" install_previous
printer_columns() { kubectl_ get "$CRD" -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}'; }
crd_is_previous() {
  echo "printer columns before the upgrade: $(printer_columns)"
  ! printer_columns | grep -qw Failed
}
check "the CRD is the previous release's (no Failed column)" crd_is_previous
# The one-time adoption the chart README documents for upgrades from 0.1.0.
adopt_crd() {
  kubectl_ annotate --overwrite "$CRD" meta.helm.sh/release-name="$RELEASE" meta.helm.sh/release-namespace="$NS" &&
    kubectl_ label --overwrite "$CRD" app.kubernetes.io/managed-by=Helm
}
check "adopt the CRD into the release (chart README)" adopt_crd
check "helm upgrade to this chart" helm_ upgrade "$RELEASE" "$CHART" --namespace "$NS" --set agentNamespace="$AGENT_NS" \
  --set hooks.namespace="$HOOKS_NS" --timeout 120s
crd_upgraded() {
  local cols chart policy
  cols="$(printer_columns)"
  chart="$(kubectl_ get "$CRD" -o jsonpath='{.metadata.labels.helm\.sh/chart}')"
  policy="$(kubectl_ get "$CRD" -o jsonpath='{.metadata.annotations.helm\.sh/resource-policy}')"
  echo "printer columns: $cols; helm.sh/chart=$chart; resource-policy=$policy"
  [[ " $cols " == *" Ready "* && " $cols " == *" Failed "* && "$chart" == "winpool-$(sed -n 's/^version: *//p' "$CHART/Chart.yaml")" && "$policy" == keep ]]
}
check "helm upgrade updated the CRD (READY and FAILED columns, chart label, keep policy)" crd_upgraded

exists() { kubectl_ "$@" -o name; }
check "Deployment, ServiceAccount, Service, PodDisruptionBudget exist" \
  exists -n "$NS" get "deployment/$FULLNAME" "serviceaccount/$FULLNAME" "service/$FULLNAME-metrics" "poddisruptionbudget/$FULLNAME"
check "ClusterRole and ClusterRoleBinding exist" \
  exists get "clusterrole/$FULLNAME" "clusterrolebinding/$FULLNAME"
# API Priority and Fairness: the API server says, on every answer, which
# FlowSchema classified the request; the agents' must be the chart's.
agent_requests_flow_to_their_level() {
  local want got
  want="$(kubectl_ get "flowschema/$FULLNAME-agents" -o jsonpath='{.metadata.uid}')" || return 1
  got="$(kubectl_ get --raw /api --as="$AGENT_SA" -v=8 2>&1 | sed -n 's/.*X-Kubernetes-Pf-Flowschema-Uid: *\([^ ]*\).*/\1/p' | head -n1)"
  echo "FlowSchema of an agent request: ${got:-none} (want $want)"
  [[ -n "$want" && "$got" == "$want" ]]
}
check "FlowSchemas and the agents' PriorityLevelConfiguration exist" \
  exists get "flowschema/$FULLNAME-agents" "flowschema/$FULLNAME-leader-election" "prioritylevelconfiguration/$FULLNAME-agents"
check "the agents' requests are classified by their FlowSchema" agent_requests_flow_to_their_level
check "Lease Role and RoleBinding exist in the release namespace" \
  exists -n "$NS" get "role/$FULLNAME-leader-election" "rolebinding/$FULLNAME-leader-election"
check "DaemonSet Role and RoleBinding exist in the agent namespace" \
  exists -n "$AGENT_NS" get "role/$FULLNAME-agents" "rolebinding/$FULLNAME-agents"
check "Events Role and RoleBinding exist in default" \
  exists -n default get "role/$FULLNAME-events" "rolebinding/$FULLNAME-events"
check "agent ServiceAccount, Role and RoleBinding exist in the agent namespace" \
  exists -n "$AGENT_NS" get serviceaccount/winpool-agent "role/$FULLNAME-agent" "rolebinding/$FULLNAME-agent"
check "agent ClusterRole, ClusterRoleBinding and admission policies exist" \
  exists get "clusterrole/$FULLNAME-agent" "clusterrolebinding/$FULLNAME-agent" \
  "validatingadmissionpolicy/$FULLNAME-agent-own-report" "validatingadmissionpolicybinding/$FULLNAME-agent-own-report" \
  "validatingadmissionpolicy/$FULLNAME-agent-own-events" "validatingadmissionpolicybinding/$FULLNAME-agent-own-events"
# The API server type-checks the policy's CEL against the report's schema and
# reports what it cannot check in the status; such an expression would fail
# every agent request at runtime.
policy_status_written() {
  local p="validatingadmissionpolicy/$POLICY"
  [[ "$(kubectl_ get "$p" -o jsonpath='{.status.observedGeneration}')" == "$(kubectl_ get "$p" -o jsonpath='{.metadata.generation}')" ]]
}
policy_type_checks() {
  local POLICY rc=0 warnings
  for POLICY in "$FULLNAME-agent-own-report" "$FULLNAME-agent-own-events" "$FULLNAME-pool-operator-pause-only"; do
    wait_for 60 policy_status_written || { echo "$POLICY: the policy's status was never written"; rc=1; continue; }
    warnings="$(kubectl_ get "validatingadmissionpolicy/$POLICY" -o jsonpath='{.status.typeChecking.expressionWarnings}')"
    echo "$POLICY: type-checking warnings: ${warnings:-none}"
    [[ -z "$warnings" ]] || rc=1
  done
  return $rc
}
check "admission policies type-check without warnings" policy_type_checks
ns_enforces() { # NAMESPACE LEVEL: the namespace exists and enforces that Pod Security level
  local v
  v="$(kubectl_ get namespace "$1" -o jsonpath='{.metadata.labels.pod-security\.kubernetes\.io/enforce}')"
  echo "namespace $1: pod-security.kubernetes.io/enforce=${v:-nothing}"
  [[ "$v" == "$2" ]]
}
check "agent namespace exists, enforce=privileged" ns_enforces "$AGENT_NS" privileged
check "a ResourceQuota admits system-node-critical pods in the agent namespace" \
  exists -n "$AGENT_NS" get "resourcequota/$FULLNAME-node-critical"
# The upgraded Deployment's pods are admitted under enforce=restricted; they
# stay Pending (no node runs them here), so the rolling update stops at its
# first surge pod: one pod of the newest ReplicaSet proves admission.
newest_rs_pods() {
  local rs
  rs="$(kubectl_ -n "$NS" get rs -l "app.kubernetes.io/instance=$RELEASE" --sort-by=.metadata.creationTimestamp -o name | tail -n1)"
  [[ -n "$rs" ]] || return 1
  echo "$rs: $(kubectl_ -n "$NS" get "$rs" -o jsonpath='{.status.replicas}') pods"
  (($(kubectl_ -n "$NS" get "$rs" -o jsonpath='{.status.replicas}') >= 1))
}
pods_created() {
  local refused
  wait_for 60 newest_rs_pods >/dev/null
  newest_rs_pods || true
  refused="$(kubectl_ -n "$NS" get events --field-selector reason=FailedCreate -o custom-columns=MESSAGE:.message --no-headers)"
  [[ -z "$refused" ]] || { echo "refused: $refused"; return 1; }
  newest_rs_pods >/dev/null
}
check "the upgraded Deployment's pods are admitted under Pod Security restricted" pods_created

# What the ServiceAccount may do: exactly what the operator needs. Each line:
# yes|no VERB RESOURCE[#SUBRESOURCE][/NAME] SCOPE, SCOPE "-" for a
# cluster-scoped resource, "*" for all namespaces, else a namespace.
can_i_table() { # USER, the table on stdin
  local user="$1" rc=0 want verb res scope got args
  while read -r want verb res scope; do
    [[ -n "$want" && "$want" != \#* ]] || continue
    args=(auth can-i "$verb" "${res%%#*}" --as="$user")
    [[ "$res" != *#* ]] || args=(auth can-i "$verb" "${res%%#*}" --subresource="${res#*#}" --as="$user")
    case "$scope" in
      -) ;;
      \*) args+=(--all-namespaces) ;;
      *) args+=(--namespace "$scope") ;;
    esac
    got="$(kubectl_ "${args[@]}" 2>/dev/null || true)"
    printf '%-3s (want %-3s) %-7s %s in %s\n' "$got" "$want" "$verb" "$res" "$scope"
    [[ "$got" == "$want" ]] || rc=1
  done
  return "$rc"
}
check "ServiceAccount can do what the operator needs and no more" can_i_table "$SA" <<EOF
yes watch  windowsnodepools.winpool.dev         -
yes patch  windowsnodepools.winpool.dev         -
yes patch  windowsnodepools.winpool.dev#status  -
no  update windowsnodepools.winpool.dev#status  -
no  create windowsnodepools.winpool.dev         -
no  delete windowsnodepools.winpool.dev         -
yes watch  nodes                                -
yes patch  nodes                                -
no  update nodes                                -
no  delete nodes                                -
yes list   pods                                 *
no  watch  pods                                 *
yes delete pods                                 some-app
yes create pods#eviction                        some-app
no  create pods                                 some-app
no  list   secrets                              *
yes get    secrets                              $NS
no  list   secrets                              $NS
no  watch  secrets                              $NS
no  get    secrets                              default
no  get    secrets                              $AGENT_NS
yes get    namespaces/$AGENT_NS                 -
no  get    namespaces/kube-system               -
yes create namespaces                           -
no  delete namespaces                           -
yes watch  daemonsets.apps                      $AGENT_NS
yes create daemonsets.apps                      $AGENT_NS
yes patch  daemonsets.apps                      $AGENT_NS
yes delete daemonsets.apps                      $AGENT_NS
no  create daemonsets.apps                      default
no  list   daemonsets.apps                      *
yes create configmaps                           $AGENT_NS
yes patch  configmaps                           $AGENT_NS
yes delete configmaps                           $AGENT_NS
no  patch  configmaps                           default
yes create leases.coordination.k8s.io           $NS
yes get    leases.coordination.k8s.io/winpool-leader $NS
yes update leases.coordination.k8s.io/winpool-leader $NS
no  update leases.coordination.k8s.io/other-lease    $NS
no  create leases.coordination.k8s.io           default
yes create events.events.k8s.io                 default
yes patch  events.events.k8s.io                 default
no  create events.events.k8s.io                 $NS
yes watch  services                             *
yes watch  endpointslices.discovery.k8s.io      *
no  create services                             $NS
yes watch  windowsnodereports.winpool.dev       $AGENT_NS
no  patch  windowsnodereports.winpool.dev       $AGENT_NS
no  patch  windowsnodereports.winpool.dev#status $AGENT_NS
no  delete windowsnodereports.winpool.dev       $AGENT_NS
no  list   windowsnodereports.winpool.dev       *
yes create windowsnodeoperations.winpool.dev    $AGENT_NS
yes patch  windowsnodeoperations.winpool.dev    $AGENT_NS
yes delete windowsnodeoperations.winpool.dev    $AGENT_NS
no  patch  windowsnodeoperations.winpool.dev    default
yes create jobs.batch                           $HOOKS_NS
yes watch  jobs.batch                           $HOOKS_NS
yes delete jobs.batch                           $HOOKS_NS
no  create jobs.batch                           $NS
no  create pods                                 $HOOKS_NS
EOF
check "the hooks namespace enforces the restricted Pod Security profile" ns_enforces "$HOOKS_NS" restricted
# The agent reads Nodes and writes none. RBAC lets it write any report in
# its namespace; the admission policy narrows that to its own node's.
check "agent ServiceAccount can do what the agent needs and no more" can_i_table "$AGENT_SA" <<EOF
yes get    nodes                                -
yes watch  nodes                                -
no  patch  nodes                                -
no  update nodes                                -
no  delete nodes                                -
no  create nodes                                -
no  patch  nodes#status                         -
yes get    configmaps                           $AGENT_NS
yes list   configmaps                           $AGENT_NS
yes watch  configmaps                           $AGENT_NS
no  create configmaps                           $AGENT_NS
no  patch  configmaps                           $AGENT_NS
no  list   configmaps                           *
no  get    configmaps                           $NS
no  get    configmaps                           default
no  get    secrets                              $AGENT_NS
no  list   secrets                              *
no  create events                               $AGENT_NS
no  patch  events                               default
yes create events                               default
no  create events                               kube-system
yes list   pods                                 $AGENT_NS
no  watch  pods                                 $AGENT_NS
no  list   pods                                 default
no  list   pods                                 *
no  create pods                                 $AGENT_NS
no  delete pods                                 $AGENT_NS
no  patch  daemonsets.apps                      $AGENT_NS
no  patch  windowsnodepools.winpool.dev         -
yes get    windowsnodereports.winpool.dev       $AGENT_NS
yes watch  windowsnodereports.winpool.dev       $AGENT_NS
yes create windowsnodereports.winpool.dev       $AGENT_NS
no  patch  windowsnodereports.winpool.dev       $AGENT_NS
yes patch  windowsnodereports.winpool.dev#status $AGENT_NS
no  update windowsnodereports.winpool.dev#status $AGENT_NS
no  update windowsnodereports.winpool.dev       $AGENT_NS
no  delete windowsnodereports.winpool.dev       $AGENT_NS
no  create windowsnodereports.winpool.dev       default
no  patch  windowsnodereports.winpool.dev#status default
yes get    windowsnodeoperations.winpool.dev    $AGENT_NS
yes list   windowsnodeoperations.winpool.dev    $AGENT_NS
yes watch  windowsnodeoperations.winpool.dev    $AGENT_NS
no  create windowsnodeoperations.winpool.dev    $AGENT_NS
no  patch  windowsnodeoperations.winpool.dev    $AGENT_NS
no  delete windowsnodeoperations.winpool.dev    $AGENT_NS
EOF

# ---- 6. uninstall ------------------------------------------------------------
check "helm uninstall" helm_ uninstall "$RELEASE" --namespace "$NS" --wait --timeout 120s
gone() { # what-for-the-message KUBECTL-ARGS...
  local what="$1"
  shift
  if [[ -n "$(kubectl_ "$@" --ignore-not-found -o name)" ]]; then
    echo "$what still exists"
    return 1
  fi
}
check "Deployment is gone" gone "deployment/$FULLNAME" -n "$NS" get deployment "$FULLNAME"
check "ClusterRole and ClusterRoleBinding are gone" \
  gone "clusterrole/clusterrolebinding $FULLNAME" get "clusterrole/$FULLNAME" "clusterrolebinding/$FULLNAME"
check "Events Role in default is gone" gone "role/$FULLNAME-events" -n default get "role/$FULLNAME-events" "rolebinding/$FULLNAME-events"
check "agent Events Role in default is gone" gone "role/$FULLNAME-agent-events" -n default get "role/$FULLNAME-agent-events" "rolebinding/$FULLNAME-agent-events"
check "agent ClusterRole and admission policy are gone" \
  gone "the agent's cluster-scoped objects" get "clusterrole/$FULLNAME-agent" "clusterrolebinding/$FULLNAME-agent" \
  "validatingadmissionpolicy/$FULLNAME-agent-own-report" "validatingadmissionpolicybinding/$FULLNAME-agent-own-report" \
  "validatingadmissionpolicy/$FULLNAME-agent-own-events" "validatingadmissionpolicybinding/$FULLNAME-agent-own-events" \
  "validatingadmissionpolicy/$FULLNAME-pool-operator-pause-only" "validatingadmissionpolicybinding/$FULLNAME-pool-operator-pause-only"
check "FlowSchemas and the agents' priority level are gone" \
  gone "the FlowSchemas" get "flowschema/$FULLNAME-agents" "flowschema/$FULLNAME-leader-election" "prioritylevelconfiguration/$FULLNAME-agents"
check "agent namespace is gone" gone "namespace/$AGENT_NS" get namespace "$AGENT_NS"
check "hooks namespace is gone" gone "namespace/$HOOKS_NS" get namespace "$HOOKS_NS"
check "the CRD is kept (crds.keep)" exists get "$CRD"

echo
if ((FAILED > 0)); then
  printf 'failed: %s\n' "${FAILURES[@]}"
fi
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
