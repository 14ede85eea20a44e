#!/usr/bin/env bash
# Checks the allocator against generate() programs no rule was tuned on: writes COUNT random ones
# (GenerationPopulation, seeded) into target/trace-population/SEED and prints the fragmentation
# ratio and modelled driver time of each, with and without its peak hinted, and how many are at or
# below 1.05. scripts/trace-table.sh is where rules are measured; this is where they are checked.
# Usage: scripts/trace-population.sh [COUNT [SEED]]   (default: 40 programs, seed 1; seeds 1 to 5 are
# the populations docs/generation-traces.md quotes)
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-40}
seed=${2:-1}
dir=target/trace-population/$seed
if [ "$(ls "$dir"/*.csv.gz 2>/dev/null | wc -l)" -ne "$count" ]; then
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  scripts/run-test-class.sh dev.vmmkit.bench.GenerationPopulation "$dir" "$count" "$seed" > "$dir.shapes.txt"
fi
exec scripts/run-test-class.sh dev.vmmkit.bench.PolicyFrontier "$dir"/*.csv.gz
