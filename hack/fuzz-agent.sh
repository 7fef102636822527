#!/usr/bin/env bash
# Fuzzes the agent's parsers of API data (docs/agent.md), each target for
# FUZZTIME (60s): go test -fuzz runs one target at a time. A failing input is
# written under the package's testdata/fuzz/, where plain go test replays it.
set -euo pipefail
cd "$(dirname "$0")/../agent"
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    go test -run='^$' -fuzz="^$target\$" -fuzztime="${FUZZTIME:-60s}" "./$(dirname "$file")"
  done
done
