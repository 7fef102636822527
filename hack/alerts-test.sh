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

while [[ $# -gt 0 ]]; do
  case "$1" in
    --metrics) METRICS_FILE="${2:?--metrics needs a file}"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

[[ -x "$PROMTOOL" ]] || { echo "promtool not found (apt-get install prometheus, or set PROMTOOL)" >&2; exit 1; }

mapfile -t alerts < <(sed -nE 's/^[[:space:]]*-[[:space:]]*alert:[[:space:]]*([A-Za-z0-9_]+)[[:space:]]*$/\1/p' "$RULES")
total=${#alerts[@]}
[[ $total -gt 0 ]] || { echo "no alert rules found in $RULES" >&2; exit 1; }

summary() { echo "$1 passed, $2 failed"; }

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
other_failures=0
for a in "${alerts[@]}"; do
  problems=()
  [[ -n "${fires[$a]:-}" ]] || problems+=("no test where it fires")
  [[ -n "${quiet[$a]:-}" ]] || problems+=("no test where it stays quiet")
  anchor="$(tr '[:upper:]' '[:lower:]' <<<"$a")"
  url="$(awk -v a="$a" '
    $0 ~ "^[[:space:]]*-[[:space:]]*alert:[[:space:]]*" a "[[:space:]]*$" { inside = 1; next }
    /^[[:space:]]*-[[:space:]]*alert:/ { inside = 0 }
    inside && /runbook_url:/ { print $2; exit }' "$RULES")"
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
    used="$(awk -v a="$a" '
      $0 ~ "^[[:space:]]*-[[:space:]]*alert:[[:space:]]*" a "[[:space:]]*$" { inside = 1; next }
      /^[[:space:]]*-[[:space:]]*alert:/ { inside = 0 }
      inside && /^[[:space:]]*(labels|annotations):/ { inside = 0 }
      inside' "$RULES" | grep -oE 'winpool_[a-zA-Z0-9_]+' | sort -u || true)"
    for m in $used; do
      if ! grep -qxF "$m" <<<"$exported"; then
        echo "FAIL $a: uses $m, which the operator does not export ($METRICS_FILE)" >&2
        bad+=("$a")
      fi
    done
  done
  for m in $(grep -oE "series: *'winpool_[a-zA-Z0-9_]+" "$TESTS" | grep -oE 'winpool_[a-zA-Z0-9_]+' | sort -u); do
    grep -qxF "$m" <<<"$exported" || { echo "FAIL $TESTS: input series $m is not exported by the operator" >&2; other_failures=1; }
  done
fi

failed="$(printf '%s\n' "${bad[@]+"${bad[@]}"}" | { grep . || true; } | sort -u | wc -l)"
if [[ $failed -gt 0 || $other_failures -gt 0 ]]; then
  if [[ $other_failures -gt 0 ]]; then
    echo "$((total - failed)) passed, $failed failed; the test inputs use metrics the operator does not export"
  else
    summary $((total - failed)) "$failed"
  fi
  exit 1
fi
summary "$total" 0
