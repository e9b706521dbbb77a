#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install what is needed, then run the storage-move benchmark (issue 18):
# five fcache schemes and QEMU's blockdev-mirror (background,
# write-blocking) between HDD-like and SSD-like nbdkit origins.
# Arguments go to bench/storage_move.py (--quick: one run per cell).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >/dev/null
exec .venv/bin/python bench/storage_move.py "$@"
