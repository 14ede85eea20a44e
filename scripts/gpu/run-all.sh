#!/usr/bin/env bash
# Runs the GPU checks under scripts/gpu/ on the GPU machine, one after another, from the repository
# root, with runtime/ (scripts/build-runtime.sh), target/ and .device/traces/ carried:
#   bash scripts/gpu/run-all.sh [NAME...]      NAME: a script's name without .sh (default: all)
# Each script's output goes to the terminal and to $OUT/NAME.log; the summary to $OUT/summary.txt.
set -uo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/vmmkit-gpu}"
mkdir -p "$out"
export OUT="$out" PYTHONUNBUFFERED=1

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in scripts/gpu/*.sh; do
    n="$(basename "$f" .sh)"
    [ "$n" = run-all ] || names+=("$n")
  done
fi

summary=()
for n in "${names[@]}"; do
  echo; echo "=== $n"
  start=$(date +%s)
  bash "scripts/gpu/$n.sh" > >(tee "$out/$n.log") 2>&1
  rc=$?
  line="$n: exit $rc ($(( $(date +%s) - start )) s)"
  echo "=== $line"
  summary+=("$line")
done
echo; echo "=== summary"; printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
