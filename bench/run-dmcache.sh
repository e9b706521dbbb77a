#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# dmcache benchmark inside user-mode-linux (see doc/reference/dmcache.rst): reads
# through dm-cache, fully cached vs origin, and the firepan transfer rate
# of dmcache vs ucache on the same data.  Medians of --runs (default 3).
# FCACHE_UML_AGENT_BIN names a plain build of the agent to use instead of
# building fcache_agent/build/fcache-agent.
set -euo pipefail
cd "$(dirname "$0")/.."
agent=${FCACHE_UML_AGENT_BIN:-}
if [ -z "$agent" ]; then
    make -s -C fcache_agent all
    agent=fcache_agent/build/fcache-agent
fi
exec python3 bench/dmcache.py --agent "$agent" "$@"
