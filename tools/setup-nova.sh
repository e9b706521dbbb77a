#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The in-process Nova/Cinder tests get their own virtualenv, .venv-nova (see
# nova-test-requirements.txt for why).  fcache is installed there as a
# regular (non-editable) package: that is what puts the driver's re-export
# module at nova/virt/fcache/ inside Nova's package, as on a compute host;
# the tests import nova_ext and cinder_ext from the work tree; and what
# registers the Tempest plugin's entry point for Tempest's plugin manager
# (Tempest itself comes from nova-test-requirements.txt).  The cloud in a
# box's other services (box-requirements.txt: Keystone, Glance, Neutron,
# the OpenStack client) go there too, as DevStack puts every service in
# one Python.  Used by tools/run-tests.sh and tools/cloud.sh (the demo does
# not need Nova).  Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

nova_stamp=.venv-nova/.fcache-reqs
nova_want=$(cat nova-test-requirements.txt box-requirements.txt \
  requirements.txt setup.cfg \
  nova/virt/fcache/__init__.py | sha256sum)
if [ ! -f "$nova_stamp" ] || [ "$(cat "$nova_stamp")" != "$nova_want" ]; then
  echo "setup-nova: installing Nova, Cinder and Tempest into .venv-nova"
  rm -rf .venv-nova
  /usr/bin/python3 -m venv .venv-nova
  .venv-nova/bin/pip install -q --upgrade pip >/dev/null
  .venv-nova/bin/pip install -q -r nova-test-requirements.txt \
    -r box-requirements.txt -r requirements.txt
  .venv-nova/bin/pip install -q --no-deps .
  echo "$nova_want" > "$nova_stamp"
fi
echo "setup-nova: done"
