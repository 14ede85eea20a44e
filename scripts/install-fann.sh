#!/usr/bin/env bash
# Installs FANN (libfann-dev, LGPL-2.1), the inference library under examples/fann-engine, so the
# build compiles that engine and FannEngineTest runs instead of skipping. Needs root (apt-get).
set -euo pipefail
if [ -f /usr/include/floatfann.h ]; then echo "install-fann: libfann-dev is already installed"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then echo "install-fann: run as root (apt-get install libfann-dev)" >&2; exit 2; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfann-dev
