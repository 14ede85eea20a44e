#!/usr/bin/env bash
# Eight threads on one manager: seven cache hits, one forcing slow-path growth on a driver that
# sleeps DELAY_US in every call (GPU-like). Prints the cache-hit threads' throughput and stalls.
# Usage: scripts/bench-concurrency.sh [SECONDS=5] [DELAY_US=30]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/java-home.sh
export JAVA_HOME="$(jdk25_home)"
./mvnw -B -q -DskipTests test-compile dependency:build-classpath -Dmdep.outputFile=target/test-classpath.txt
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED \
  -cp "target/test-classes:target/classes:$(cat target/test-classpath.txt)" \
  dev.vmmkit.bench.ConcurrencyBenchmark "${1:-5}" "${2:-30}"
