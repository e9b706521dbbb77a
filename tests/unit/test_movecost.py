# SPDX-License-Identifier: Apache-2.0
"""Unit tests of nova_ext.movecost: the storage-move metric and ``auto``.

The figures are computed by hand in the comments; the paper's rankings
(§7.3) are checked where the model reproduces them.
"""

import math

import pytest

from nova_ext import movecost as sm

GIB = 1 << 30


def test_migration_cost_equation_4():
    # 1.5 * (0.25 * 2 + 0.75 * 0.4) = 1.5 * 0.8 = 1.2
    assert sm.migration_cost(1.5, 0.4, 2.0, 0.25) == pytest.approx(1.2)
    assert sm.migration_cost(1.5, None, 2.0, 0.25) is None
    assert sm.migration_cost(math.inf, 0.1, 0.0, 0.5) == math.inf


@pytest.mark.parametrize('gamma', [-0.1, 1.1, float('nan'), '0.5', True])
def test_gamma_checked(gamma):
    with pytest.raises(ValueError):
        sm.migration_cost(1.0, 0.0, 0.0, gamma)


@pytest.mark.parametrize('src,dst,expected', [
    # Table 6 with alpha = 0.3, beta = 0.6.
    ('ssd', 'ssd', {'dbt': 1.6, 'mirror': 1.3, 'lr': 0.3, 'slr': 1.0,
                    'aio': 1.3}),
    ('hdd', 'ssd', {'dbt': 0.6, 'mirror': 0.3, 'lr': 0.3, 'slr': 0.3,
                    'aio': 0.3}),
    ('ssd', 'hdd', {'dbt': 1.0, 'mirror': 1.0, 'lr': 0.0, 'slr': 0.7,
                    'aio': 1.0}),
    ('hdd', 'hdd', dict.fromkeys(sm.SCHEMES, 0.0)),
])
def test_expected_wear_is_table_6(src, dst, expected):
    got = dict((s, sm.expected_wear(s, src, dst, alpha=0.3, beta=0.6))
               for s in sm.SCHEMES)
    assert got == pytest.approx(expected)


def test_expected_cost_idle_volume_is_a_plain_copy():
    wl = sm.Workload(10 * GIB, write_bps=0, read_bps=0)
    cost = sm.expected_cost('dbt', 'hdd', 'hdd', wl, 0.5)
    assert (cost.lambda_time, cost.lambda_io, cost.lambda_wear,
            cost.mc) == (1.0, 0.0, 0.0, 0.0)


def test_expected_cost_mirror_by_hand():
    # HDD to HDD, 9.5 GB (a plain copy at 95 MB/s: 100 s), 9.5 MB/s of
    # writes, no reads, alpha 0.5.  The VM puts 9.5 MB/s on A and the
    # duplicates, 4.75 MB/s, on B: the copy gets min(85.5, 90.25) = 85.5
    # MB/s, 111.11 s, lambda_time 1.1111.  The copy uses 85.5/95 = 0.9 of
    # each HDD: a request takes 1/(1744 * (1 - 0.8*0.9)) = 1/488.32 s on
    # either, so perf = 488.32 and lambda_io = 1 - 488.32/1744 = 0.72.
    # MC(0.5) = 1.1111 * (0.5*0 + 0.5*0.72) = 0.4.
    wl = sm.Workload(9.5e9, write_bps=9.5e6, read_bps=0)
    cost = sm.expected_cost('mirror', 'hdd', 'hdd', wl, 0.5)
    assert cost.lambda_time == pytest.approx(1.11111, rel=1e-4)
    assert cost.lambda_io == pytest.approx(0.72)
    assert cost.lambda_wear == 0.0
    assert cost.mc == pytest.approx(0.4)


def test_dbt_does_not_converge_when_dirtying_outpaces_the_copy():
    # SSD to HDD: the VM's 100 MB/s of writes on the SSD leave the copy
    # min(180 - 100, 95) = 80 MB/s, and they are all to distinct blocks
    # (beta 1): the rounds never shrink.  dbt_capped never finishes.
    wl = sm.Workload(10 * GIB, write_bps=100e6, read_bps=0, beta=1.0)
    capped = sm.expected_cost('dbt_capped', 'ssd', 'hdd', wl, 0.5)
    assert capped.lambda_time == math.inf
    assert capped.mc == math.inf
    # The paper's DBT: the first pass (S/80), three rounds that do not
    # shrink the whole volume dirty (3 S/80), then the VM paused for the
    # copy of all of it at the HDD's 95 MB/s, against a plain copy's S/95.
    cost = sm.expected_cost('dbt', 'ssd', 'hdd', wl, 0.5)
    assert cost.lambda_time == pytest.approx(4 * 95 / 80 + 1)
    # The pause is a sixth of the move, with no I/O served at all.
    assert cost.lambda_io >= 1 / cost.lambda_time
    mirror = sm.expected_cost('mirror', 'ssd', 'hdd', wl, 0.5)
    assert cost.mc > mirror.mc
    scheme, _ = sm.choose_scheme('ssd', 'hdd', wl, 0.5)
    assert scheme not in ('dbt', 'dbt_capped')


def test_dbt_capped_is_dbt_when_it_converges_and_never_auto():
    wl = sm.Workload(10 * GIB, write_bps=10e6, read_bps=30e6)
    for src, dst in (('ssd', 'hdd'), ('hdd', 'ssd'), ('ssd', 'ssd')):
        dbt = sm.expected_cost('dbt', src, dst, wl, 0.5).as_dict()
        capped = sm.expected_cost('dbt_capped', src, dst, wl, 0.5).as_dict()
        dbt.pop('scheme')
        capped.pop('scheme')
        assert dbt == capped
    assert 'dbt_capped' not in sm.SCHEMES
    assert 'dbt_capped' in sm.ALL_SCHEMES


@pytest.mark.parametrize('src,dst,fast', [('hdd', 'ssd', 'b'),
                                          ('ssd', 'hdd', 'a')])
def test_aio_routes_the_copied_region_to_the_faster_medium(src, dst, fast):
    # §5.2.2, as the agent routes it (test_origin_move.c,
    # aio_reads_from_the_faster_side; test_volume_move.py,
    # test_aio_routes_as_the_model): reads of the copied region (alpha)
    # on the faster medium, the rest on A; writes to the copied region
    # duplicated and acknowledged by the faster.
    assert sm.faster_side(src, dst) == fast
    assert sm.routes('aio', src, dst, 0.25) == [
        (0.75, 'r', ('a',)), (0.25, 'r', (fast,)),
        (0.75, 'w', ('a',)), (0.25, 'w', ('fast',))]


# The paper's workloads (Table 7) read three times what they write.
BUSY = sm.Workload(20 * GIB, write_bps=10e6, read_bps=30e6)


@pytest.mark.parametrize('gamma', [0.0, 0.2, 0.5, 0.8, 1.0])
def test_hdd_to_ssd_lr_always_cheapest(gamma):
    # §7.3.1: "LR always yields the least migration cost when a VM is
    # migrated from an HDD to an SSD".
    assert sm.choose_scheme('hdd', 'ssd', BUSY, gamma)[0] == 'lr'


def test_ssd_to_hdd_depends_on_gamma():
    # §7.3.2: AIO when I/O performance matters, LR when wear does.
    assert sm.choose_scheme('ssd', 'hdd', BUSY, 0.1)[0] == 'aio'
    assert sm.choose_scheme('ssd', 'hdd', BUSY, 0.8)[0] == 'lr'
    _, costs = sm.choose_scheme('ssd', 'hdd', BUSY, 1.0)
    lr = [c for c in costs if c.scheme == 'lr'][0]
    assert lr.mc == 0.0          # no write reaches the SSD


@pytest.mark.parametrize('gamma', [0.3, 0.5, 0.8])
def test_ssd_to_ssd_lr_for_most_weights(gamma):
    # §7.3.3: "for the majority of cases (0.2 < gamma < 1), LR".
    assert sm.choose_scheme('ssd', 'ssd', BUSY, gamma)[0] == 'lr'


def test_equal_costs_go_to_the_shorter_move():
    # HDD to HDD with gamma 1: nothing wears, every MC is 0.  BUSY writes
    # 2441 random 4 KiB blocks a second, a quarter of them ahead of the
    # copy: LR's copy skips them, each one more access of the HDD B (54
    # KB of its streaming, against 4 KiB saved), and SLR's copy, which
    # skips nothing, ends first (§5.2.1).
    scheme, costs = sm.choose_scheme('hdd', 'hdd', BUSY, 1.0)
    assert {c.mc for c in costs} == {0.0}
    assert scheme == 'slr'
    times = dict((c.scheme, c.lambda_time) for c in costs)
    assert times['slr'] == min(times.values()) < times['lr']


def test_hdd_to_hdd_wear_weight_only_scales():
    for scheme in sm.SCHEMES:
        low = sm.expected_cost(scheme, 'hdd', 'hdd', BUSY, 0.0)
        mid = sm.expected_cost(scheme, 'hdd', 'hdd', BUSY, 0.5)
        assert low.lambda_wear == 0.0
        assert mid.mc == pytest.approx(low.mc / 2)


def test_plan_moves_mixes_schemes_and_beats_any_single_one():
    moves = [
        {'volume_id': 'a', 'from_medium': 'ssd', 'to_medium': 'hdd',
         'workload': BUSY, 'wear_weight': 0.1},
        {'volume_id': 'b', 'from_medium': 'ssd', 'to_medium': 'hdd',
         'workload': BUSY, 'wear_weight': 0.9},
        {'volume_id': 'c', 'from_medium': 'hdd', 'to_medium': 'ssd',
         'workload': BUSY, 'wear_weight': 0.5},
    ]
    plan = sm.plan_moves(moves)
    assert [m['scheme'] for m in plan['moves']] == ['aio', 'lr', 'lr']
    assert plan['total_mc'] == pytest.approx(
        sum(m['expected']['mc'] for m in plan['moves']))
    assert all(plan['total_mc'] < total
               for total in plan['single'].values())


# A finished move as the agent reports it (volume-move-status): SSD to
# HDD, 10 GiB, 40 s against a 20 s plain copy.
DONE = {
    'volume_id': 'v1', 'scheme': 'slr', 'state': 'done',
    'from': '/dev/ssd/v1', 'to': '/dev/hdd/v1',
    'bytes_total': 10 * GIB, 'bytes_copied': 10 * GIB, 'rounds': 1,
    'dirty_bytes': 0, 'eta_s': 0, 'downtime_ms': 150, 'elapsed_s': 40.0,
    'error': None,
    'io': {'a_read_bytes': 10 * GIB + 2 * GIB, 'a_write_bytes': 3 * GIB,
           'b_read_bytes': 1 * GIB, 'b_write_bytes': 10 * GIB + 1 * GIB,
           'vm_write_bytes': 4 * GIB, 'redundant_write_bytes': 0},
}


def test_measured_cost_by_hand():
    # lambda_time = 40/20 = 2.  SSD source: 3 GiB of the VM's 4 GiB of
    # writes reached it: lambda_wear 0.75.  The VM read 12 + 1 - 10 = 3
    # GiB and wrote 4 GiB in 40 s: 7 GiB/40 s = 187.9 MB/s against a best
    # of 375.8 MB/s (14 GiB/40 s): lambda_io 0.5.
    # MC(0.4) = 2 * (0.4*0.75 + 0.6*0.5) = 2 * 0.6 = 1.2.
    cost = sm.measured_cost(DONE, 20.0, 'ssd', 'hdd', 0.4,
                            best_io_bps=14 * GIB / 40.0)
    assert cost.scheme == 'slr'
    assert cost.lambda_time == 2.0
    assert cost.lambda_wear == pytest.approx(0.75)
    assert cost.lambda_io == pytest.approx(0.5)
    assert cost.mc == pytest.approx(1.2)


def test_measured_cost_ssd_destination_leaves_the_copy_out():
    # HDD to SSD: B's writes less the copy's 10 GiB, 1 GiB per 4 GiB.
    cost = sm.measured_cost(DONE, 20.0, 'hdd', 'ssd', 0.5)
    assert cost.lambda_wear == pytest.approx(0.25)
    assert (cost.lambda_io, cost.mc) == (None, None)


def test_measured_cost_given_throughput():
    cost = sm.measured_cost(DONE, 20.0, 'hdd', 'hdd', 0.0,
                            best_io_bps=100.0, io_bps=80.0)
    assert cost.lambda_io == pytest.approx(0.2)
    assert cost.mc == pytest.approx(0.4)


def test_measured_cost_refuses_an_unfinished_move():
    with pytest.raises(ValueError, match='copying, not done'):
        sm.measured_cost(dict(DONE, state='copying'), 20.0, 'ssd', 'hdd',
                         0.5)
    broken = dict(DONE, io={'a_read_bytes': 1})
    with pytest.raises(ValueError, match='io.a_write_bytes'):
        sm.measured_cost(broken, 20.0, 'ssd', 'hdd', 0.5)


@pytest.mark.parametrize('kwargs', [
    {'size_bytes': 0}, {'write_bps': -1}, {'alpha': 1.5},
    {'bandwidth_bps': {'nvme': 1e9}}, {'bandwidth_bps': {'ssd': 0}},
    {'depth': 0.5}, {'request_bytes': 0}, {'iops': {'hdd': 0}},
    {'iops': {'tape': 10}},
])
def test_workload_checked(kwargs):
    args = dict({'size_bytes': GIB, 'write_bps': 1e6}, **kwargs)
    with pytest.raises(ValueError):
        sm.Workload(**args)


def test_unknown_scheme_and_medium():
    with pytest.raises(ValueError, match='scheme'):
        sm.expected_cost('teleport', 'ssd', 'hdd', BUSY, 0.5)
    with pytest.raises(ValueError, match='medium'):
        sm.expected_cost('lr', 'nvme', 'hdd', BUSY, 0.5)


# The benchmark's media and workload
# (doc/research/storage-migration-bench.rst): 64 MiB, an HDD-like origin of
# 50 MB/s, an SSD-like one of 200 MB/s, a VM asking 800 requests/s of 4 KiB,
# half of them writes.
BENCH = sm.Workload(64 << 20, write_bps=400 * 4096, read_bps=400 * 4096,
                    bandwidth_bps={'hdd': 50e6, 'ssd': 200e6})


def test_writes_shift_behind_the_cursor_when_the_copied_region_is_faster():
    # HDD to SSD: LR serves the copied region from the SSD, so the VM gets
    # more done late in the move, behind the cursor; mirror waits for the
    # HDD throughout and keeps alpha.  Measured: LR 0.57, mirror 0.51.
    lr = sm.expected_cost('lr', 'hdd', 'ssd', BENCH, 1.0)
    mirror = sm.expected_cost('mirror', 'hdd', 'ssd', BENCH, 1.0)
    dbt = sm.expected_cost('dbt', 'hdd', 'ssd', BENCH, 1.0)
    assert mirror.lambda_wear == pytest.approx(BENCH.alpha)
    assert dbt.lambda_wear == pytest.approx(BENCH.beta)
    assert lr.lambda_wear > mirror.lambda_wear + 0.1
    # The other way the writes behind the cursor go to the slower disk:
    # SLR's VM slows as the cursor advances, and more of its writes land
    # on the SSD source ahead of it (Table 6's 1 - alpha grows).
    slr = sm.expected_cost('slr', 'ssd', 'hdd', BENCH, 1.0)
    assert slr.lambda_wear > 1 - BENCH.alpha


@pytest.mark.parametrize('gamma, scheme', [(0.0, 'lr'), (0.5, 'lr'),
                                           (1.0, 'mirror')])
def test_hdd_to_ssd_on_the_benchmark_media(gamma, scheme):
    # Both moves are bound by the HDD's bandwidth, so lambda_time is about
    # the same; when only wear counts mirror's lower share behind the
    # cursor wins (measured MC 0.37 against LR's 0.41 and qemu-wb's
    # 0.38), when I/O counts LR's SSD reads do.
    assert sm.choose_scheme('hdd', 'ssd', BENCH, gamma)[0] == scheme


# The paper's IOmeter (Table 7): 75 % reads, OIO 16 -- 16 requests in
# flight, which keep both disks busy at once.
IOMETER_16 = sm.Workload(20 * GIB, write_bps=10e6, read_bps=30e6, depth=16)


@pytest.mark.parametrize('gamma, scheme', [(0.0, 'aio'), (0.1, 'aio'),
                                           (0.5, 'slr'), (0.9, 'lr'),
                                           (1.0, 'lr')])
def test_ssd_to_hdd_slr_when_io_and_wear_weigh_the_same(gamma, scheme):
    # §5.3: "Those who care about both the IO performance and lifetime of
    # SSDs will tend to use SLR when migrating from SSDs to HDDs"; §7.3.2:
    # AIO if I/O is preferred, LR if wear is, SLR at gamma 0.5.  With one
    # request in flight the model cannot see it: SLR's writes to the
    # copied region, on the HDD, then cost their latency on every request,
    # and SLR's lambda_io is mirror's (0.64); with 16 in flight they cost
    # their share of the HDD only, while the SSD serves the rest.
    assert sm.choose_scheme('ssd', 'hdd', IOMETER_16, gamma)[0] == scheme


def test_requests_in_flight_spread_over_both_disks():
    # The bound of operational analysis: with N requests in flight the VM
    # waits for the busiest disk's share, not for every request in turn.
    one = sm.Workload(20 * GIB, write_bps=10e6, read_bps=30e6)
    slr1 = sm.expected_cost('slr', 'ssd', 'hdd', one, 0.0)
    slr16 = sm.expected_cost('slr', 'ssd', 'hdd', IOMETER_16, 0.0)
    assert slr16.lambda_io < slr1.lambda_io - 0.15
    # Everything on one disk: nothing to overlap, depth changes nothing.
    dbt1 = sm.expected_cost('dbt', 'ssd', 'hdd', one, 0.0)
    dbt16 = sm.expected_cost('dbt', 'ssd', 'hdd', IOMETER_16, 0.0)
    assert dbt16.lambda_io == pytest.approx(dbt1.lambda_io)


@pytest.mark.parametrize('gamma', [0.0, 0.5, 1.0])
def test_hdd_to_hdd_slr_lowest(gamma):
    # §7.3.4: "On average, SLR has the lowest migration cost".  (Its "LR
    # ranks the second" and "LR takes the shortest time" the model does
    # not reproduce: BUSY's writes ahead of the copy cost LR's copy more
    # accesses of the HDD B than they save it; see
    # doc/reference/storage-migration-nova.rst.)
    assert sm.choose_scheme('hdd', 'hdd', IOMETER_16, gamma)[0] == 'slr'


@pytest.mark.parametrize('gamma', [0.0, 0.5, 1.0])
def test_hdd_to_ssd_lr_with_requests_in_flight(gamma):
    # §7.3.1 holds with the paper's OIO too.
    assert sm.choose_scheme('hdd', 'ssd', IOMETER_16, gamma)[0] == 'lr'


@pytest.mark.parametrize('gamma', [0.3, 0.5, 0.8])
def test_ssd_to_ssd_lr_with_requests_in_flight(gamma):
    # §7.3.3, with the paper's OIO.
    assert sm.choose_scheme('ssd', 'ssd', IOMETER_16, gamma)[0] == 'lr'


@pytest.mark.parametrize('src, dst', [('ssd', 'ssd'), ('ssd', 'hdd'),
                                      ('hdd', 'ssd'), ('hdd', 'hdd')])
@pytest.mark.parametrize('workload', [
    BUSY, IOMETER_16,
    # IOzone's write test: one stream of 64 KiB writes, nothing read.
    sm.Workload(20 * GIB, write_bps=40e6, read_bps=0, request_bytes=65536),
])
def test_lr_is_never_faster_than_a_plain_copy(src, dst, workload):
    # Equation (2): "lambda_migration_time is always greater than 1".  The
    # blocks LR skips are read from A all the same (move_copy.c reads a
    # chunk of A in one request) and split B's writes, so skipping them
    # does not make the copy faster than the media allow.
    cost = sm.expected_cost('lr', src, dst, workload, 0.5)
    assert cost.lambda_time >= 1.0


def test_lr_copy_slower_than_slr_towards_an_hdd():
    # §5.2.1: SLR's "copy process does not need to be interrupted every
    # time to check the bitmap, which results in better migration time";
    # §7.3.2: from SSD to HDD "SLR has the shortest migration time".
    costs = dict((s, sm.expected_cost(s, 'ssd', 'hdd', IOMETER_16, 0.5))
                 for s in sm.SCHEMES)
    assert costs['slr'].lambda_time < costs['lr'].lambda_time
    assert costs['slr'].lambda_time == min(c.lambda_time
                                           for c in costs.values())
