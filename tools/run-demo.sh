#!/bin/bash
# Run the fcache demo: fio's FirepanIF Figure-5 workload against slow
# shared storage (nbdkit + rate filter) without a cache, with a cold
# fcache-agent cache and with a warm one.  About 2 minutes.
# Options are passed to tools/demo.py (see: tools/run-demo.sh --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
exec .venv/bin/python tools/demo.py "$@"
