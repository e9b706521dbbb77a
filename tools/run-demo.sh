#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The fcache demo: the testbed's short run (tools/testbed.py --quick).
# Shared storage in nbdkit (rate and delay filters), two hosts (an
# fcache-agent each), a neighbour VM on each, and a VM running fio's
# Figure-5 workload (vmload) that runs without cache, gets a cache, warms
# it and live-migrates once per strategy.  Prints the table and the plots'
# paths.  About 4 minutes.  Options go to tools/testbed.py
# (tools/run-demo.sh --help); --full runs the whole experiment instead.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
preset=--quick
if [ "${1:-}" = "--full" ]; then
  preset=
  shift
fi
exec .venv/bin/python tools/testbed.py $preset "$@"
