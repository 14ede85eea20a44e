#!/usr/bin/env bash
# Prints the fragmentation ratio and modelled driver time of every trace class on the host driver:
# the synthetic classes (written by SyntheticTraces into target/synthetic-traces, seeded) and the
# recorded traces in traces/. Default settings alone; --with-hint adds a run with each trace's true
# peak as VMM_PEAK_HINT; arguments after -- are more settings for PolicyFrontier.
# Usage: scripts/trace-table.sh [-- KEY=VALUE,...]   or   scripts/trace-table.sh --with-hint
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/synthetic-traces
mkdir -p "$dir"
scripts/run-test-class.sh dev.vmmkit.bench.SyntheticTraces "$dir" >/dev/null
traces=("$dir"/*.csv.gz traces/*.csv.gz)
mode=(--default-only)
if [ "${1:-}" = "--with-hint" ]; then mode=(); shift; fi
exec scripts/run-test-class.sh dev.vmmkit.bench.PolicyFrontier "${mode[@]}" "${traces[@]}" "$@"
