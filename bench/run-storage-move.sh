#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install what is needed, then run the storage-move benchmark (issues 18
# and 35): the paper's five schemes and QEMU's blockdev-mirror
# (background, write-blocking) between emulated HDD and SSD media, with
# the paper's metrics and Table 7 workloads, auto against the best
# measured scheme, and mixing schemes on shared media (section 7.4).
#
#   bench/run-storage-move.sh --size 64M --out DIR/storage-move.json
#   bench/run-storage-move.sh --smoke          # the CI-sized run
#
# Arguments go to bench/storage_move.py (--help lists them).  It writes
# the JSON, the report (.txt), the tables (.rst.txt) and the figures
# (.png, -mixing.png) side by side.  Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >/dev/null
exec .venv/bin/python bench/storage_move.py "$@"
