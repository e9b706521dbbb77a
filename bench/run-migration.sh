#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install what is needed, then run the migration benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >/dev/null
exec .venv/bin/python bench/migration.py "$@"
