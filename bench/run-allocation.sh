#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# On-demand cache allocation evaluation (see doc/research/allocation-eval.rst):
# builds fcache-replay, generates traces with backup scans into a
# temporary directory and replays them with every allocation policy,
# staging kind and predictor, against libCacheSim's LRU as a peer.
# Arguments go to bench/allocation.py (--quick: the CI-sized run, under a
# minute; --plot-dir DIR; --json).  Results are also written to
# results/allocation-<timestamp>.json.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s -C fcache_agent all
py=python3
[ -x .venv/bin/python ] && py=.venv/bin/python
mkdir -p results
exec "$py" bench/allocation.py \
    --out-json "results/allocation-$(date +%Y%m%d-%H%M%S).json" "$@"
