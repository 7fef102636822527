#!/usr/bin/env bash
# Checks and unit-tests the winpool alert rules with promtool (Debian's
# /usr/bin/promtool, or $PROMTOOL):
#   1. promtool check rules charts/winpool/files/alerts.yaml
#   2. promtool test rules  tests/alerts/alerts_test.yaml
#   3. coverage: every alert in the rules file has, in the test file, an
#      evaluation where it fires (non-empty exp_alerts) and one where it stays
#      quiet (exp_alerts: []), each written as `alertname:` directly followed by
#      `exp_alerts:`; its runbook_url points at its own section of
#      docs/alerts.md (#<alert name in lower case>), and that section exists.
#   4. with --metrics FILE (a saved /metrics page of the operator, or a list of
#      metric names, one a line): every winpool_* metric the rules and the
#      tests use is one the operator exports.
#   5. notifications, with amtool (Debian's /usr/bin/amtool from
#      prometheus-alertmanager, or $AMTOOL): amtool check-config
#      docs/notifications/alertmanager.yaml; `amtool config routes test`
#      sends every alert of the rules file, with its severity, to the
#      receivers that severity must reach (NOTIFY below), and alerts that are
#      not winpool's to none of winpool's; every alert name the configuration
#      names is one the rules file defines; and the templates
#      (docs/notifications/templates/winpool.tmpl) render each alert's pool,
#      summary, description and runbook_url.
# Runs from any directory; prints `N passed, 0 failed` (N = alert rules) last
# on success and exits non-zero on any failure.
#
#   hack/alerts-test.sh [--metrics FILE]
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

RULES=charts/winpool/files/alerts.yaml
TESTS=tests/alerts/alerts_test.yaml
RUNBOOK=docs/alerts.md
PROMTOOL="${PROMTOOL:-$(command -v promtool || echo /usr/bin/promtool)}"
METRICS_FILE="${WINPOOL_METRICS_FILE:-}"
NOTIFY_CONFIG=docs/notifications/alertmanager.yaml
NOTIFY_TEMPLATES=docs/notifications/templates/winpool.tmpl
AMTOOL="${AMTOOL:-$(command -v amtool || echo /usr/bin/amtool)}"

# Step 5's oracle: the receivers an alert of each severity must reach
# (comma-separated, in any order). Written here, not read from the
# Alertmanager configuration, so a route that drifts fails the test instead
# of redefining what is right. A severity missing here fails its alerts.
declare -A NOTIFY=(
  [critical]="winpool-slack,winpool-teams"
  [warning]="winpool-slack"
)
# Alerts that are not winpool's, and the receiver they must reach alone: the
# root route's, i.e. the winpool route must not take them. The Windows one is
# how other rule sets (windows_exporter's) name theirs.
FOREIGN_ALERTS=(KubeNodeNotReady WindowsNodeDown)
FOREIGN_RECEIVER=default

while [[ $# -gt 0 ]]; do
  case "$1" in
    --metrics) METRICS_FILE="${2:?--metrics needs a file}"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

[[ -x "$PROMTOOL" ]] || { echo "promtool not found (apt-get install prometheus, or set PROMTOOL)" >&2; exit 1; }
[[ -x "$AMTOOL" ]] || { echo "amtool not found (apt-get install prometheus-alertmanager, or set AMTOOL)" >&2; exit 1; }

mapfile -t alerts < <(sed -nE 's/^[[:space:]]*-[[:space:]]*alert:[[:space:]]*([A-Za-z0-9_]+)[[:space:]]*$/\1/p' "$RULES")
total=${#alerts[@]}
[[ $total -gt 0 ]] || { echo "no alert rules found in $RULES" >&2; exit 1; }

summary() { echo "$1 passed, $2 failed"; }
# The lines of alert $1's rule in the rules file, after its `- alert:` line.
rule() {
  awk -v a="$1" '
    $0 ~ "^[[:space:]]*-[[:space:]]*alert:[[:space:]]*" a "[[:space:]]*$" { inside = 1; next }
    /^[[:space:]]*-[[:space:]]*alert:/ { inside = 0 }
    inside' "$RULES"
}
# A label or annotation (severity, runbook_url) of alert $1.
# (No `exit` after a pipe: the writer would die of SIGPIPE, and pipefail with it.)
rule_field() { rule "$1" | awk -v f="$2" '$1 == f ":" && !found { print $2; found = 1 }'; }
# A comma-separated list of receivers in a canonical order.
receivers() { tr ',' '\n' <<<"$1" | sed '/^$/d' | sort | paste -sd, -; }

# 1. Syntax and PromQL.
if ! "$PROMTOOL" check rules "$RULES"; then
  summary 0 "$total"
  exit 1
fi

# 2. Unit tests. On failure, count the distinct alerts promtool reports.
if ! out="$("$PROMTOOL" test rules "$TESTS" 2>&1)"; then
  printf '%s\n' "$out"
  failed="$(printf '%s\n' "$out" | sed -nE 's/.*alertname: ([A-Za-z0-9_]+), time:.*/\1/p' | sort -u | wc -l)"
  [[ $failed -gt 0 ]] || failed=$total # the file did not load, or similar
  summary $((total - failed)) "$failed"
  exit 1
fi
printf '%s\n' "$out"

# 3. Coverage and runbook links.
declare -A fires=() quiet=()
while read -r kind name; do
  if [[ $kind == quiet ]]; then quiet[$name]=1; else fires[$name]=1; fi
done < <(awk '
  /^[[:space:]]*alertname:/ { name = $2; next }
  name != "" && /^[[:space:]]*exp_alerts:[[:space:]]*\[\][[:space:]]*$/ { print "quiet", name; name = ""; next }
  name != "" && /^[[:space:]]*exp_alerts:/ { print "fires", name; name = ""; next }
  { name = "" }' "$TESTS")

bad=()
other=() # failures that are no one alert's, said in the last line
for a in "${alerts[@]}"; do
  problems=()
  [[ -n "${fires[$a]:-}" ]] || problems+=("no test where it fires")
  [[ -n "${quiet[$a]:-}" ]] || problems+=("no test where it stays quiet")
  anchor="$(tr '[:upper:]' '[:lower:]' <<<"$a")"
  url="$(rule_field "$a" runbook_url)"
  [[ "$url" == *"/docs/alerts.md#$anchor" ]] || problems+=("runbook_url '$url' does not end in /docs/alerts.md#$anchor")
  grep -qE "^##+[[:space:]]+$a[[:space:]]*$" "$RUNBOOK" 2>/dev/null || problems+=("no '## $a' section in $RUNBOOK")
  if [[ ${#problems[@]} -gt 0 ]]; then
    bad+=("$a")
    for p in "${problems[@]}"; do echo "FAIL $a: $p" >&2; done
  fi
done

# 4. Metric names against what the operator exports.
if [[ -n "$METRICS_FILE" ]]; then
  [[ -r "$METRICS_FILE" ]] || { echo "cannot read metrics file $METRICS_FILE" >&2; exit 1; }
  # Exported names: `# TYPE name kind` lines, sample names, or bare names; a
  # histogram/summary also exports name_bucket, name_sum and name_count.
  exported="$(grep -oE '^(# TYPE )?winpool_[a-zA-Z0-9_]+' "$METRICS_FILE" | sed 's/^# TYPE //' | sort -u)"
  exported="$(printf '%s\n' "$exported" | sed -E 'p; s/$/_bucket/p; s/_bucket$/_sum/p; s/_sum$/_count/' | sort -u)"
  for a in "${alerts[@]}"; do
    # The metric names used in this alert's expression.
    used="$(rule "$a" | awk '/^[[:space:]]*(labels|annotations):/ { done = 1 } !done' | grep -oE 'winpool_[a-zA-Z0-9_]+' | sort -u || true)"
    for m in $used; do
      if ! grep -qxF "$m" <<<"$exported"; then
        echo "FAIL $a: uses $m, which the operator does not export ($METRICS_FILE)" >&2
        bad+=("$a")
      fi
    done
  done
  for m in $(grep -oE "series: *'winpool_[a-zA-Z0-9_]+" "$TESTS" | grep -oE 'winpool_[a-zA-Z0-9_]+' | sort -u); do
    grep -qxF "$m" <<<"$exported" || { echo "FAIL $TESTS: input series $m is not exported by the operator" >&2; unexported=1; }
  done
  [[ -z "${unexported:-}" ]] || other+=("the test inputs use metrics the operator does not export")
fi

# 5. Notifications: the Alertmanager example is valid, and every alert gets to
# the people its severity must reach, with what they need in the message.
if ! out="$("$AMTOOL" check-config "$NOTIFY_CONFIG" 2>&1)"; then
  printf '%s\n' "$out"
  summary 0 "$total" # an invalid configuration notifies no one of anything
  exit 1
fi
printf '%s\n' "$out"
routes_test() { "$AMTOOL" config routes test --config.file="$NOTIFY_CONFIG" "$@" 2>/dev/null || true; }
for a in "${alerts[@]}"; do
  severity="$(rule_field "$a" severity)"
  want="${NOTIFY[$severity]:-}"
  if [[ -z "$want" ]]; then
    echo "FAIL $a: severity '$severity' has no expected receivers in NOTIFY ($0)" >&2
    bad+=("$a")
    continue
  fi
  got="$(routes_test alertname="$a" severity="$severity")"
  if [[ "$(receivers "$got")" != "$(receivers "$want")" ]]; then
    echo "FAIL $a (severity $severity): $NOTIFY_CONFIG routes it to '$got', want '$want'" >&2
    bad+=("$a")
  fi
done
for a in "${FOREIGN_ALERTS[@]}"; do
  got="$(routes_test alertname="$a" severity=critical)"
  if [[ "$got" != "$FOREIGN_RECEIVER" ]]; then
    echo "FAIL $NOTIFY_CONFIG: $a, not a winpool alert, reaches '$got', want '$FOREIGN_RECEIVER' alone" >&2
    other+=("the winpool route takes alerts that are not winpool's")
  fi
done
# An inhibit rule or route naming an alert that was renamed matches nothing,
# silently. (A name directly followed by "." is a regular expression's prefix.)
for n in $(grep -oE '(Winpool|WindowsNode)[A-Za-z0-9_]+\.?' "$NOTIFY_CONFIG" | grep -v '\.$' | sort -u); do
  if ! printf '%s\n' "${alerts[@]}" | grep -qxF "$n"; then
    echo "FAIL $NOTIFY_CONFIG: names $n, which $RULES does not define" >&2
    other+=("$NOTIFY_CONFIG names alerts that do not exist")
  fi
done
# The templates, rendered for one firing alert of each rule (the annotations
# as Prometheus would have expanded them): the message must say the pool and
# carry the summary, the description and the runbook.
data="$(mktemp)"
trap 'rm -f "$data"' EXIT
for a in "${alerts[@]}"; do
  severity="$(rule_field "$a" severity)"
  url="$(rule_field "$a" runbook_url)"
  labels="\"alertname\":\"$a\",\"severity\":\"$severity\",\"pool\":\"pool-under-test\""
  annotations="\"summary\":\"summary of $a\",\"description\":\"description of $a\",\"runbook_url\":\"$url\""
  printf '{"status":"firing","alerts":[{"status":"firing","labels":{%s},"annotations":{%s}}],"commonLabels":{%s},"commonAnnotations":{%s}}\n' \
    "$labels" "$annotations" "$labels" "$annotations" >"$data"
  for t in winpool.slack.text winpool.teams.text; do
    if ! text="$("$AMTOOL" template render --template.glob="$NOTIFY_TEMPLATES" --template.data="$data" \
      --template.text="{{ template \"winpool.title\" . }}
{{ template \"$t\" . }}" 2>&1)"; then
      echo "FAIL $a: $NOTIFY_TEMPLATES ($t) does not render: $text" >&2
      bad+=("$a")
      continue
    fi
    for must in pool-under-test "summary of $a" "description of $a" "$url"; do
      grep -qF -- "$must" <<<"$text" || { echo "FAIL $a: the $t message lacks '$must'" >&2; bad+=("$a"); }
    done
  done
done

failed="$(printf '%s\n' "${bad[@]+"${bad[@]}"}" | { grep . || true; } | sort -u | wc -l)"
if [[ $failed -gt 0 || ${#other[@]} -gt 0 ]]; then
  if [[ ${#other[@]} -gt 0 ]]; then
    echo "$((total - failed)) passed, $failed failed; $(printf '%s\n' "${other[@]}" | sort -u | paste -sd';' - | sed 's/;/; /g')"
  else
    summary $((total - failed)) "$failed"
  fi
  exit 1
fi
summary "$total" 0
