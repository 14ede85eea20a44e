#!/usr/bin/env bash
# Writes a llama-architecture GGUF model with generated weights and a small vocabulary, through
# llama.cpp's gguf writer from the npm package (scripts/fetch-llama-cpp.sh fetches it). No download.
#   scripts/tiny-gguf.sh OUT.gguf                      # 2 layers, 64 wide, 512 tokens: about 0.5 MB
#   scripts/tiny-gguf.sh OUT.gguf --embd 2048 --layers 16 --heads 16 --kv-heads 16 --ff 5632 \
#       --vocab 32000 --type f16                       # about 1.9 GB
#   scripts/tiny-gguf.sh OUT.gguf --chat-template chatml   # with ChatML as tokenizer.chat_template
# Needs python3 with numpy and yaml (scripts/gguf-python.sh finds one). Exits 3 when it cannot run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 1 ]; then
  echo "usage: scripts/tiny-gguf.sh OUT.gguf [--embd N --layers N --heads N --kv-heads N --ff N --vocab N --context N --type f32|f16 --seed N --chat-template chatml|TEXT]" >&2
  exit 2
fi
exec bash "$root/scripts/gguf-python.sh" "$root/scripts/tiny_gguf.py" "$@"
