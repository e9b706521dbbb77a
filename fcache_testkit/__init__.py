# SPDX-License-Identifier: Apache-2.0
"""The test kit: the real programs a test or a benchmark drives, and checks.

Shared by the functional tests (tests/functional, tests/nova_functional,
tests/real_libvirt) and the benchmarks that reuse them (bench/soak.py,
bench/dmcache.py), so that bench/ imports nothing of tests/:

* ``harness``: the ASan/UBSan agent and nbdkit origins, bounded in time,
  with their sanitizer reports checked;
* ``oracle``: what each byte of a volume should read, a checked random
  workload, and libnbd reads with many requests in flight;
* ``migration_util``: two agents, a VM stand-in and a migration between
  them;
* ``uml``: a user-mode-linux guest (``umlvm``) and the scenarios that run
  inside it (``uml/guest/``, scripts run by path in the guest).

Not installed and not part of the product (setup.cfg lists the packages
that are).  tools/fcdemo is the demo's and the host benchmarks' driver of
the same programs, without the sanitizers and the oracle.
"""
