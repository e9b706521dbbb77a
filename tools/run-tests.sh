#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Install what is needed, then run every test: the agent's C unit tests
# (cmocka, under ASan/UBSan), pep8, the oslo-config sample check, and the
# Python unit and functional tests (the functional tests drive the real
# agent, built with sanitizers, through nbdkit, libnbd, fio and qemu-io;
# tests/real_libvirt live-migrates QEMU between two real libvirt daemons,
# which needs root for its network and mount namespaces), and the cloud in
# a box (tools/cloud.sh: a real OpenStack on this machine) with fcache's
# Tempest tests and the failure paths of tests/cloud run against it.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh
tools/setup-nova.sh
export PATH="$PWD/.venv/bin:$PATH"

# Each section's heading carries the seconds since the run began, so a
# log shows where CI's time goes.
section() {
  echo "== [${SECONDS}s, load $(cut -d' ' -f1 /proc/loadavg)] $*"
}

section "The ASan agent, which every suite below drives"
make -s -C fcache_agent asan

# The cloud in a box comes up in the background too (a few minutes of
# services starting, a core at most), and is taken down after its tests.
# A box already up (a developer's) is used and left up.
box_log=$(mktemp)
box_ours=1
if tools/cloud.sh status >/dev/null 2>&1; then
  box_ours=0
fi
tools/cloud.sh up >"$box_log" 2>&1 &
box_pid=$!
box_down() {
  if [ "$box_ours" = 1 ]; then
    tools/cloud.sh down >>"$box_log" 2>&1 || true
  fi
}

# Nova's and Cinder's in-process tests mostly wait on agents, nbdkit,
# Ceph and qemu-io (about a third of a core each): they run in the
# background, in two streams, while the C tests and the fuzzers keep both
# cores busy, and are waited for before the timing-sensitive functional
# tests start.  Cinder's tests and Nova's run in processes of their own
# (they register clashing options on the global oslo.config object);
# within a stream, one process per suite (importing Nova takes seconds).
nova_log=$(mktemp)
nova_log2=$(mktemp)
(
  set -e
  .venv-nova/bin/python -m testtools.run tests.nova_functional.test_cinder_api \
    tests.nova_functional.test_cinder_actions \
    tests.nova_functional.test_cinder_rbd_cacheable
  .venv-nova/bin/python -m testtools.run \
    tests.nova_functional.test_live_migration \
    tests.nova_functional.test_mixed_fleet \
    tests.nova_functional.test_storage_move
  .venv-nova/bin/python -m testtools.run \
    tests.nova_functional.test_tempest_plugin
) >"$nova_log" 2>&1 &
nova_pid=$!
(
  set -e
  .venv-nova/bin/python -m testtools.run \
    tests.nova_functional.test_volume_life \
    tests.nova_functional.test_server_actions \
    tests.nova_functional.test_rbd \
    tests.nova_functional.test_balancing
) >"$nova_log2" 2>&1 &
nova_pid2=$!
trap 'pkill -TERM -P "$nova_pid" 2>/dev/null || true; pkill -TERM -P "$nova_pid2" 2>/dev/null || true; kill "$nova_pid" "$nova_pid2" "$box_pid" 2>/dev/null || true; wait "$box_pid" 2>/dev/null || true; box_down' EXIT

section "C unit tests (ASan/UBSan)"
make -s -C fcache_agent check

section "fuzzing: each libFuzzer harness for 5 s (ASan/UBSan)"
make -s -C fcache_agent -j2 fuzz
make -s -C fcache_agent -j2 fuzz-run FUZZ_SECONDS=5

section "pep8"
flake8

section "config sample and the control schema copy are generated from the code"
sample=$(mktemp)
oslo-config-generator --config-file etc/fcache/fcache-config-generator.conf \
  --output-file "$sample"
diff -u etc/fcache/fcache.conf.sample "$sample" || {
  echo "etc/fcache/fcache.conf.sample is stale: run tox -e genconfig" >&2
  exit 1
}
rm -f "$sample"
# nova_ext's copy of the agent's control operations and arguments.
python tools/gen-control-schema.py --check --agent fcache_agent/build/asan/fcache-agent

section "Nova and Cinder in process (.venv-nova): the driver, live migrations (also to hosts without fcache), storage moves (swap_volume), the volume's life, the Cinder API extension, the Tempest plugin"
nova_rc=0
wait "$nova_pid" || nova_rc=$?
nova_rc2=0
wait "$nova_pid2" || nova_rc2=$?
trap 'kill "$box_pid" 2>/dev/null || true; wait "$box_pid" 2>/dev/null || true; box_down' EXIT
cat "$nova_log" "$nova_log2"
rm -f "$nova_log" "$nova_log2"
if [ "$nova_rc" -ne 0 ] || [ "$nova_rc2" -ne 0 ]; then
  echo "FAILED: Nova and Cinder in process (exit status $nova_rc, $nova_rc2)" >&2
  exit 1
fi

section "The cloud in a box: Keystone, Placement, Glance, Neutron, Nova (two computes, each with its libvirtd and fcache-agent), Cinder on Ceph; fcache's Tempest tests (a live migration per strategy, guests reporting their data) and the failure paths (tests/cloud)"
box_rc=0
wait "$box_pid" || box_rc=$?
cat "$box_log"
# (set -e holds in a trap too: a kill of a process already gone must not
# end it before box_down.)
trap 'kill "$nova_unit_pid" 2>/dev/null || true; box_down' EXIT
nova_unit_pid=
if [ "$box_rc" -ne 0 ]; then
  echo "FAILED: tools/cloud.sh up (exit status $box_rc)" >&2
  exit 1
fi
# Nova's libvirt driver unit tests (tests/nova_unit) run meanwhile: the
# box's tests mostly wait on its guests and services.  stestr runs one
# process per CPU (about 75 s on 2 cores alone; 155 s in one).
nova_unit_repo=$(mktemp -d)
nova_unit_log=$(mktemp)
.venv-nova/bin/stestr --test-path tests/nova_unit --top-dir . \
  --repo-url "$nova_unit_repo" run --abbreviate >"$nova_unit_log" 2>&1 &
nova_unit_pid=$!
box_failed=()
tempest_out=$(mktemp)
tools/cloud.sh tempest --concurrency 2 2>&1 | tee "$tempest_out" ||
  box_failed+=(tempest)
cloud_out=$(mktemp)
python -m pytest -p no:cacheprovider --timeout=900 -q tests/cloud 2>&1 |
  tee "$cloud_out" || box_failed+=(tests/cloud)
if [ ${#box_failed[@]} -gt 0 ]; then
  tools/cloud.sh status || true
  echo "The services' last errors:"
  grep -h ' ERROR ' "${FCACHE_BOX_DIR:-/var/tmp/fcache-box}"/logs/*.log |
    grep -v 'loopingcall' | tail -n 30 || true
  # What failed, last: a CI summary shows the end of the output.
  echo "Tempest's failures:"
  sed -n '/tests - output below/,/^Totals/p' "$tempest_out" | tail -n 80
  echo "tests/cloud's failures:"
  sed -n '/= FAILURES =/,$p' "$cloud_out" | tail -n 60
  echo "FAILED: the cloud in a box: ${box_failed[*]} (its logs: ${FCACHE_BOX_DIR:-/var/tmp/fcache-box}/logs)" >&2
  exit 1
fi
box_down
trap - EXIT

section "Nova's libvirt driver unit tests with fcache's driver in LibvirtDriver's place (tests/nova_unit), run beside the box's"
nova_unit_rc=0
wait "$nova_unit_pid" || nova_unit_rc=$?
cat "$nova_unit_log"
rm -rf "$nova_unit_repo" "$nova_unit_log"
if [ "$nova_unit_rc" -ne 0 ]; then
  echo "FAILED: tests/nova_unit (exit status $nova_unit_rc)" >&2
  exit 1
fi

# The operations' checks and the packages, run in the other files' stream
# once its suites end (they build docs and packages in their own
# directories, so they do not touch what the suites run).
operations() {
  set -e
  section "Operations: every source file names its licence (SPDX); shellcheck; docs and release notes (Sphinx, warnings are errors); the DevStack plugin and the systemd unit (bats)"
  tools/check-spdx.py
  shellcheck -x devstack/plugin.sh devstack/lib/fcache devstack/settings \
    tests/devstack/standins.bash tests/devstack/plugin.bats tests/systemd/unit.bats \
    tests/packaging/debian.bats tests/packaging/wheel.bats tools/version.sh
  rm -rf build/doc build/releasenotes
  sphinx-build -W --keep-going -q -b html doc build/doc/html
  sphinx-build -W --keep-going -q -b man doc build/doc/man
  sphinx-build -a -E -W --keep-going -q -b html releasenotes/source \
    build/releasenotes/html
  bats tests/devstack tests/systemd

  section "Packages: dpkg-buildpackage builds fcache-agent and python3-fcache, the unpacked agent answers agent-status; make install into a DESTDIR; the wheel through pbr.build"
  bats tests/packaging
}

section "Python unit and functional tests, and live migration under real libvirt, in three streams"
# One pytest process per functional test file: memory the oracle's libnbd
# handles leave behind (a few tens of MiB per test, in C, out of Python's
# reach) is returned with each process instead of piling up to >10 GiB.
# Run alone, one after the other, the files took 25 minutes; they mostly
# wait on agents, nbdkit, QEMU and UML (a run of them all averages about
# one core of two), so three streams share the two cores:
# - the machines' stream: the suites that run whole machines -- user-mode
#   Linux kernels, QEMU guests, a Ceph cluster, the testbed's VMs --, whose
#   checks are data against an oracle and counts, never time;
# - the migrations' stream: the long files of live migration and storage
#   moves, whose time bounds (rate limits, an agent restart under 10 s, a
#   handshake cut within 8 s) are far from what they take; then the soak,
#   the VM load generator and live migration under real libvirt;
# - every other file (new ones included), to the console as it goes; then
#   the operations' checks and the packages.
# (Balanced on an idle machine's times: the dmcache UML scenarios alone
# take about 8 minutes.)
machines=(tests/functional/test_dmcache_uml.py tests/functional/test_rbd_origin.py
  tests/functional/test_testbed.py tests/functional/test_oracle_workload.py
  tests/functional/test_ceph_box.py tests/functional/test_qemu_migration.py
  tests/functional/test_uml_origins.py)
migrations=(tests/functional/test_migration.py tests/functional/test_migration_faults.py
  tests/functional/test_migration_settle_peer.py tests/functional/test_migration_tls.py
  tests/functional/test_origin_faults.py tests/functional/test_volume_move.py
  tests/functional/test_soak.py tests/functional/test_vmload.py tests/real_libvirt)
others=(tests/unit)
for t in tests/functional/test_*.py; do
  case " ${machines[*]} ${migrations[*]} " in
    *" $t "*) ;;
    *) others+=("$t") ;;
  esac
done
run_stream() {
  local failures=$1 t
  shift
  for t in "$@"; do
    echo "-- [${SECONDS}s, load $(cut -d' ' -f1 /proc/loadavg)] $t"
    python -m pytest -p no:cacheprovider --timeout=900 -q "$t" "${pytest_args[@]}" ||
      echo "$t" >>"$failures"
  done
}
pytest_args=("$@")
failures=$(mktemp)
machines_log=$(mktemp)
migrations_log=$(mktemp)
# The machines' and the migrations' streams log to files, printed once
# they end.
{
  run_stream "$failures" "${machines[@]}"
  echo "-- [${SECONDS}s] the machines' stream ended"
} >"$machines_log" 2>&1 &
machines_pid=$!
{
  run_stream "$failures" "${migrations[@]}"
  echo "-- [${SECONDS}s] the migrations' stream ended"
} >"$migrations_log" 2>&1 &
migrations_pid=$!
run_stream "$failures" "${others[@]}"
# Not "(operations) || ...": a command list with || turns set -e off in
# all it runs, and a failing check would go unnoticed.
set +e
(operations)
ops_rc=$?
set -e
if [ "$ops_rc" -ne 0 ]; then
  echo "the operations' checks or the packages (exit status $ops_rc)" >>"$failures"
fi
echo "-- [${SECONDS}s] the other files' stream ended"
wait "$migrations_pid" || true
wait "$machines_pid" || true
echo "-- the migrations' stream, the soak, the VM load and real libvirt:"
cat "$migrations_log"
echo "-- the machines' stream:"
cat "$machines_log"
rm -f "$machines_log" "$migrations_log"
if [ -s "$failures" ]; then
  echo "FAILED: $(tr '\n' ' ' <"$failures")" >&2
  rm -f "$failures"
  exit 1
fi
rm -f "$failures"

section "All tests passed"
