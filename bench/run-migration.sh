#!/bin/bash
# Install what is needed, then run the migration benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >/dev/null
exec .venv/bin/python bench/migration.py "$@"
