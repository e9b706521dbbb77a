# SPDX-License-Identifier: Apache-2.0
"""A short soak: 16 volumes, I/O on each, 4 migrations at a time, LSan.

The CI-sized run of ``bench/soak.py`` (the full one is 64 volumes and 8
concurrent migrations for minutes, ``bench/run-soak.sh``): both agents
are the ASan/LSan build; every request must complete without error,
every read and a final read of each whole volume must match the oracle,
every migration must complete, both agents must stop cleanly with no
LeakSanitizer report, and memory must stay within bounds measured on the
development machine with a wide margin.
"""

import importlib.util
import os

import pytest

from fcache_testkit import harness

MiB = 1 << 20
VOLUMES = 16
CONCURRENT = 4
SECONDS = 40

# The agent's own accounting (volume-show memory_bytes) of a volume with
# a 4 MiB cache of 4 KiB blocks: about 21 KiB for its map, plus its demand
# tracker (doc/reference/allocation.rst), which grows with the window's working
# set up to 1 MiB: 67 KiB in all measured with this workload; 128 KiB allowed.
MAX_ACCOUNTED_PER_VOLUME = 128 * 1024
# VmRSS of the ASan build, whose allocator keeps up to 256 MiB of freed
# memory in quarantine: the peak measured with 16 volumes was 420-460
# MiB; 900 MiB allowed.
MAX_PEAK_RSS_KIB = 900 * 1024


def _load_soak():
    path = os.path.join(harness.REPO, 'bench', 'soak.py')
    spec = importlib.util.spec_from_file_location('fcache_bench_soak', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.timeout(180)
def test_short_soak_loses_nothing_and_leaks_nothing(agent_binary, workdir):
    soak_mod = _load_soak()
    soak = soak_mod.Soak(workdir, agent_binary, volumes=VOLUMES,
                         concurrent=CONCURRENT, seconds=SECONDS,
                         volume_size=16 * MiB, volume_cache=4 * MiB,
                         depth=4, log=lambda *a: None,
                         # Each wave prepared before it starts: the agent's
                         # registry evicts finished migrations once it holds
                         # 64 (after about 16 waves here), and an eviction
                         # during a concurrent migration-finish crashed an
                         # agent (doc/research/benchmarks.rst, "Soak").
                         prepare_together=True)
    try:
        r = soak.run()
    finally:
        for a in (getattr(soak, 'a', None), getattr(soak, 'b', None)):
            if a is not None:
                a.kill()
    table = soak_mod.table(r)
    print(table)
    q = r['requests']
    m = r['migrations']
    assert not r['problems'], (r['problems'], table)
    assert q['done'] > 10000, table
    assert q['lost'] == 0 and q['errors'] == 0, (q['error_examples'], table)
    assert q['mismatches'] == 0, (q['mismatch_examples'], table)
    assert not r['verify_mismatches'], r['verify_mismatches']
    # Every strategy ran, and every migration completed.
    assert m['failed'] == 0, (m['failures'], table)
    assert all(m['by_strategy'][s] >= 1 for s in soak_mod.STRATEGIES), m
    for name in ('a', 'b'):
        st = r['agent_%s' % name]
        assert st['exit_status'] == 0, st
        assert not st['leak_report'], st['leak_excerpt']
        assert not st['sanitizer_reports'], st['sanitizer_reports']
    acc = r['agent_memory']['a']['volume_memory_bytes_per_volume']
    assert 0 < acc <= MAX_ACCOUNTED_PER_VOLUME, r['agent_memory']
    assert r['memory']['a_peak_kib'] <= MAX_PEAK_RSS_KIB, table
