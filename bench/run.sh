#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fcache benchmarks (see doc/research/benchmarks.rst): fully cached reads against
# nbdkit, the cold-miss path against the bare origin, memory per cached
# block.  Medians of --runs (default 3) runs; results/bench-<timestamp>.json.
# Options are passed to bench/bench.py (see: bench/run.sh --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
exec .venv/bin/python bench/bench.py "$@"
