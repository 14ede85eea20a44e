#!/usr/bin/env bash
# Trains the AOT cache of the JVM that the native shim starts (JDK 25, JEP 514) for one Java runtime
# and keeps it in that runtime's home as vmmkit.aot; `vmmkit run` passes it to the shim
# (VMMKIT_AOT_CACHE). A cache only matches the runtime and the jar path it was trained with, so
# scripts/build-runtime.sh runs this for runtime/, and scripts/gpu/allocator-speed.sh runs it again
# on the GPU machine when the cache is missing or was trained elsewhere.
#   scripts/build-aot-cache.sh [JAVA_HOME]     (default: runtime/)
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
home="$(cd "${1:-$root/runtime}" && pwd)"
jar="$root/target/vmmkit.jar"
[ -x "$home/bin/java" ] || { echo "build-aot-cache: no $home/bin/java" >&2; exit 2; }
[ -f "$jar" ] || { echo "build-aot-cache: no $jar (build first)" >&2; exit 2; }
rm -f "$home/vmmkit.aot"
"$home/bin/java" -XX:+UseSerialGC -XX:-UsePerfData -Xlog:disable -Xlog:all=error:stderr \
  -XX:AOTCacheOutput="$home/vmmkit.aot" --enable-native-access=ALL-UNNAMED \
  -cp "$jar" dev.vmmkit.interpose.AotTraining
# Remember which jar it was trained for, so a moved checkout retrains, and whether the NVIDIA driver
# was there: trained without it, the cache lacks the CUDA driver's classes (on an H200, opening a
# device's allocator took 2.1-3.2 ms with such a cache against 0.6-0.8 with one trained there).
echo "$jar" > "$home/vmmkit.aot.jar"
if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then echo cuda; else echo host; fi > "$home/vmmkit.aot.driver"
echo "build-aot-cache: $home/vmmkit.aot ($(du -h "$home/vmmkit.aot" | cut -f1), for $jar)" >&2
