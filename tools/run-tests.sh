#!/bin/bash
# Install what is needed, then run every test: the agent's C unit tests
# (cmocka, under ASan/UBSan), pep8, the oslo-config sample check, and the
# Python unit and functional tests (the functional tests drive the real
# agent, built with sanitizers, through nbdkit, libnbd, fio and qemu-io).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

echo "== C unit tests (ASan/UBSan)"
make -s -C fcache_agent asan check

echo "== pep8"
flake8

echo "== config sample is generated from the code"
oslo-config-generator --config-file etc/fcache/fcache-config-generator.conf \
  --output-file "$(mktemp)"

echo "== Python unit and functional tests"
python -m pytest -p no:cacheprovider --timeout=900 tests/unit tests/functional "$@"
