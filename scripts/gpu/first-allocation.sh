#!/usr/bin/env bash
# A process's first allocation when it is a large one: scripts/gpu/first_allocation.c (C, 1 GiB
# right after cudaFree(0)) and scripts/gpu/first_tensor.py (PyTorch, 1 GiB right after
# torch.cuda.init()), native and under `vmmkit run`, alternating, REPS (3) processes each; then one
# vmmkit process of each at VMM_LOG=info (how long opening the allocator took, and the first large
# allocation's breakdown). Prints one line per process.
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" first-allocation
reps="${REPS:-3}"
find_cudart first-allocation cuda
if ! gcc -O2 -Wall -o "$out/first_allocation" scripts/gpu/first_allocation.c "$cudart" -Wl,-rpath,"$cudart_dir"; then
  echo "first-allocation: cannot build first_allocation" >&2; exit 2
fi
ensure_aot_cache first-allocation
vmmkit=(./vmmkit run --driver cuda --profile off --)
for r in $(seq "$reps"); do
  echo "C native: $("$out/first_allocation" $((1 << 30)))"
  echo "C vmmkit: $("${vmmkit[@]}" "$out/first_allocation" $((1 << 30)) 2>&1 | grep '^{')"
  echo "PyTorch native: $("$py" scripts/gpu/first_tensor.py 2>&1 | grep '^{')"
  echo "PyTorch vmmkit: $("${vmmkit[@]}" "$py" scripts/gpu/first_tensor.py 2>&1 | grep '^{')"
done
for program in "$out/first_allocation $((1 << 30))" "$py scripts/gpu/first_tensor.py"; do
  # shellcheck disable=SC2086 # the program and its argument are two words
  echo "breakdown: $(VMM_LOG=info "${vmmkit[@]}" $program 2>&1 | grep '^{\|opened in\|first large\|mode ready' | tr '\n' ' ')"
done
