#!/usr/bin/env bash
# Runs the allocator's model tests (random operation sequences checked against a reference model,
# and threads under random driver faults) over a wide range of seeds instead of their chosen ones,
# to look for what those miss. Not part of ./vmmkit test: a range of 100 seeds takes minutes.
# Usage: scripts/soak-model-tests.sh [FROM-TO]   (default 100-199; a failure names its seed, and
# rerunning with that seed alone, e.g. 137-137, repeats it)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/java-home.sh
export JAVA_HOME="$(jdk25_home)"
range="${1:-100-199}"
[[ "$range" =~ ^[0-9]+-[0-9]+$ ]] || { echo "soak-model-tests: the range must be FROM-TO, not '$range'" >&2; exit 2; }
exec ./mvnw -B test -Dvmmkit.test.seeds="$range" -Dsurefire.failIfNoSpecifiedTests=false \
  -Dtest='VmmManagerModelTest#randomSequencesMatchTheModel+randomSequencesMatchTheModelWhileStreamsLag,MemoryTagModelTest,VmmManagerResizeModelTest,VmmManagerConcurrentFaultTest'
