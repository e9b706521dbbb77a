#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A small real OpenStack with fcache on this one machine (doc/install/cloud-box.rst):
#
#   tools/cloud.sh up       install what it needs, start it (idempotent)
#   tools/cloud.sh status   every service, and each compute host's agent
#   tools/cloud.sh tempest  fcache's Tempest scenarios against it
#   tools/cloud.sh down     stop everything it started
#
# State, logs and data: $FCACHE_BOX_DIR (default /var/tmp/fcache-box).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = up ] || [ "${1:-}" = tempest ]; then
  tools/setup.sh >/dev/null
  tools/setup-nova.sh >/dev/null
fi
PYTHONPATH="$PWD/tools:$PWD" exec .venv-nova/bin/python -m cloudbox "$@"
