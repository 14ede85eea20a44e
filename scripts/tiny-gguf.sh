#!/usr/bin/env bash
# Writes a llama-architecture GGUF model with generated weights and a small vocabulary, through
# llama.cpp's gguf writer from the npm package (scripts/fetch-llama-cpp.sh fetches it). No download.
#   scripts/tiny-gguf.sh OUT.gguf                      # 2 layers, 64 wide, 512 tokens: about 1 MB
#   scripts/tiny-gguf.sh OUT.gguf --embd 2048 --layers 16 --heads 16 --kv-heads 16 --ff 5632 \
#       --vocab 32000 --type f16                       # about 1.7 GB
# Needs python3 with numpy and yaml (Debian: python3-numpy python3-yaml).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gguf_py="${LLAMA_GGUF_PY:-$(ls -d "$root"/.deps/llama.cpp/*/gguf-py 2>/dev/null | tail -n 1)}"
if [ $# -lt 1 ]; then
  echo "usage: scripts/tiny-gguf.sh OUT.gguf [--embd N --layers N --heads N --kv-heads N --ff N --vocab N --context N --type f32|f16 --seed N]" >&2
  exit 2
fi
if [ -z "$gguf_py" ] || [ ! -d "$gguf_py" ]; then
  echo "tiny-gguf: no gguf writer: run scripts/fetch-llama-cpp.sh first (or set LLAMA_GGUF_PY)" >&2
  exit 3
fi
# The first python3 that has numpy and yaml (a pyenv or venv python may lack what Debian's has).
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null 2>&1 && "$python" -c 'import numpy, yaml' 2>/dev/null; then
    PYTHONPATH="$gguf_py" exec "$python" "$root/scripts/tiny_gguf.py" "$@"
  fi
done
echo "tiny-gguf: no python3 with numpy and yaml (Debian: apt-get install python3-numpy python3-yaml)" >&2
exit 3
