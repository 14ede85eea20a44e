#!/usr/bin/env bash
# Benchmark of the engine host on the host emulation (prints numbers; nothing is asserted):
# overhead per generate against a direct FFM call of the plugin, requests/s with 8 HTTP clients,
# and the reload pause, in process and with a worker per instance (the isolation cost per generate), and
# how long a worker takes to start; then time to first token and tokens/s as an HTTP client sees
# them, streamed against non-streamed, on the tiny GGUF model (llama engine; echo when llama.cpp was
# not fetched). Usage: scripts/bench-engine.sh [seconds per phase, default 3] [streaming runs, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/java-home.sh
export JAVA_HOME="$(jdk25_home)"
./mvnw -B -q -DskipTests test-compile dependency:build-classpath -Dmdep.outputFile=target/test-classpath.txt
cp="target/test-classes:target/classes:$(cat target/test-classpath.txt)"
java=("$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED -Djava.util.logging.config.file=/dev/null -cp "$cp")
"${java[@]}" dev.vmmkit.engine.EngineHostBenchmark "${1:-3}"
"${java[@]}" dev.vmmkit.engine.StreamingBenchmark "${2:-20}"
