#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install what is needed, then run the load and soak benchmark (64 volumes,
# waves of 8 concurrent migrations, both agents under ASan/LSan).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >/dev/null
exec .venv/bin/python bench/soak.py "$@"
