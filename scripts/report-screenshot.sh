#!/usr/bin/env bash
# Regenerates docs/memory-report-bert.png: the HTML memory report of the BERT trace, as headless
# Chromium draws it. Needs chromium (scripts/install-test-deps.sh) and the traces in traces/.
#   bash scripts/report-screenshot.sh [TRACE] [PNG]
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
trace="${1:-$root/traces/bert_infer.csv.gz}"
png="${2:-$root/docs/memory-report-bert.png}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$root/vmmkit" replay --driver host --warmup 0 --html "$work/report.html" "$trace"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1200,2350 --virtual-time-budget=10000 --screenshot="$png" "file://$work/report.html" 2>"$work/chromium.log"
echo "wrote $png"
