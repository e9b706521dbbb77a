#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints fcache's version: pbr's, from the git tag (0.0.1.devN until the
# first tag), the one the Python package, the agent, fcache-replay and the
# release notes all carry.  PBR_VERSION overrides it, as it does for pbr
# (package builds set it).  Prints nothing and fails if no pbr can tell.
set -u
if [ -n "${PBR_VERSION:-}" ]; then
  echo "$PBR_VERSION"
  exit 0
fi
cd "$(dirname "$0")/.." || exit 1
# Debian's python3 first: tools/setup.sh installs python3-pbr for it, and
# a python3 earlier in PATH (pyenv, a virtualenv) may have no pbr.
for py in .venv/bin/python3 /usr/bin/python3 python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  if v=$("$py" -c 'import pbr.packaging; print(pbr.packaging.get_version("fcache"))' \
      2>/dev/null) && [ -n "$v" ]; then
    echo "$v"
    exit 0
  fi
done
echo "tools/version.sh: no pbr to tell fcache's version (pip install pbr, or apt-get install python3-pbr)" >&2
exit 1
