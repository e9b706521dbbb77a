# SPDX-License-Identifier: Apache-2.0
"""The fleet simulation (bench.fleet) on tiny fleets."""

import json

import numpy as np
import pytest

from bench.fleet import __main__ as cli
from bench.fleet import calibrate
from bench.fleet import constants as K
from bench.fleet import evacuate
from bench.fleet import migration
from bench.fleet import sim
from bench.fleet import workload
from bench.traces import shapes

GIB = K.GIB


def _fleet(seed=1, hosts=6, per_host=4, days=0.5):
    return workload.Fleet(hosts, per_host, days, 300.0, seed)


def _week(fleet, **kw):
    return sim.run_week(fleet, **kw)


class _FixedFleet(object):
    """Constant demand: host 0's VMs are heavy, the others light."""

    def __init__(self, hosts=5, per_host=4, windows=12):
        self.hosts = hosts
        self.vms_per_host = per_host
        self.n = hosts * per_host
        self.windows = windows
        self.window_s = 300.0
        d = np.full(self.n, 2.0 * GIB)
        d[:per_host] = 12.0 * GIB
        self._d = d

    def demand_bytes(self, window):
        return self._d.copy()


def test_same_seed_same_week_and_evacuation():
    a = _week(_fleet(seed=3), snapshot_window=60)
    b = _week(_fleet(seed=3), snapshot_window=60)
    for kind in ('balanced', 'static'):
        assert np.array_equal(a['variance'][kind], b['variance'][kind])
    assert np.array_equal(a['moves'], b['moves'])
    assert np.array_equal(a['host_of'], b['host_of'])
    c = _week(_fleet(seed=4))
    assert not np.array_equal(a['variance']['static'],
                              c['variance']['static'])
    ea = evacuate.run(_fleet(seed=3), a['snapshot']['host_of'],
                      a['snapshot']['demand'], a['capacity_bytes'], 60)
    eb = evacuate.run(_fleet(seed=3), b['snapshot']['host_of'],
                      b['snapshot']['demand'], b['capacity_bytes'], 60)
    for mix in evacuate.MIXES:
        ra, rb = ea[0]['mixes'][mix], eb[0]['mixes'][mix]
        assert ra['storage_extra_bytes'] == rb['storage_extra_bytes']
        assert ra['recovery_s_max'] == rb['recovery_s_max']


def test_vms_are_conserved():
    fleet = _fleet(hosts=8, days=1.0)
    week = _week(fleet)
    assert week['migrations'] > 0
    host_of = week['host_of']
    assert len(host_of) == fleet.n
    assert host_of.min() >= 0 and host_of.max() < fleet.hosts
    names = [vm.host for vm in week['vms']]
    assert names == [sim.host_name(h) for h in host_of]
    assert len({vm.id for vm in week['vms']}) == fleet.n
    # Every host's load is the sum of its VMs' demands: nothing lost.
    d = fleet.demand_bytes(fleet.windows - 1)
    u = sim.utilisation(d, host_of, week['capacity_bytes'], fleet.hosts)
    assert u.sum() * week['capacity_bytes'] == pytest.approx(d.sum())


def test_overloaded_host_is_relieved():
    fleet = _FixedFleet()
    capacity = 50 * GIB             # host 0: 48 GiB, 96 %; others 8 GiB
    week = _week(fleet, capacity=capacity)
    static = week['max_utilisation']['static']
    assert static[-1] == pytest.approx(48.0 / 50.0)
    # Three windows over the threshold, then a move.
    assert week['moves'][:2].sum() == 0
    assert week['moves'][2] == 1
    host0 = np.bincount(week['host_of'], minlength=fleet.hosts)[0]
    assert host0 == fleet.vms_per_host - 1
    assert week['max_utilisation']['balanced'][-1] < 0.9
    assert week['variance']['balanced'][-1] < week['variance']['static'][-1]
    assert week['strategies'] == {'hybrid': 1}


def test_evacuation_empties_the_host_and_none_reads_most():
    fleet = _fleet(hosts=6, per_host=4)
    week = _week(fleet, snapshot_window=40)
    snap = week['snapshot']
    (ev,) = evacuate.run(fleet, snap['host_of'], snap['demand'],
                         week['capacity_bytes'], 40)
    source = int(ev['host'][len('host'):])
    on_source = {sim.vm_id(i) for i in np.nonzero(snap['host_of']
                                                  == source)[0]}
    assert len(on_source) == fleet.vms_per_host
    reads = {}
    for mix in evacuate.MIXES:
        r = ev['mixes'][mix]
        moved = {v['vm'] for v in r['per_vm']}
        assert moved == on_source
        assert all(v['destination'] != ev['host'] for v in r['per_vm'])
        reads[mix] = r['storage_extra_bytes']
    assert reads['none'] > 0
    for mix in ('hybrid', 'firepan_if', 'plan'):
        assert reads[mix] < reads['none']
    assert ev['mixes']['none']['storage_vs_none'] == 1.0


def test_strategies_order_their_recovery():
    p = workload.archetype_params()['web']
    hot = 1 << 20
    vm = dict(hot_blocks=hot, volume_blocks=hot * p['vol_over_hot'],
              alpha=p['alpha'], cold=p['cold'], cached_blocks=hot // 8,
              iops=500.0)
    strategies = list(migration.STRATEGIES)
    res = migration.simulate([migration.VmState(**vm) for _ in strategies],
                             strategies, 2e8, horizon_s=1800.0)
    by = dict(zip(strategies, range(len(strategies))))
    rec = res['recovery_s']
    assert rec[by['hybrid']] <= rec[by['firepan_if']] < rec[by['none']]
    extra = res['extra_reads']
    assert extra[by['hybrid']] == 0.0
    assert extra[by['firepan']] == 0.0
    assert extra[by['none']] > extra[by['firepan_if']] > 0
    # firepan's downtime is its copy plus the measured fixed part.
    copy = hot // 8 * K.BLOCK_SIZE / 2e8
    assert res['downtime_s'][by['firepan']] == pytest.approx(
        copy + K.FIREPAN_FIXED_DOWNTIME_S)
    # Before the switchover's downtime ends the VM does nothing.
    assert res['rel'][by['none']][0] == 0.0


def test_fleet_demand_is_the_formula_at_each_vms_size():
    fleet = _fleet(hosts=10, per_host=20, days=1.0)
    w = 100
    got = fleet.demand_blocks(w)
    t_end = (w + 1) * fleet.window_s
    rate = fleet.rate_factor(t_end - K.RWSS_WINDOW_S / 2.0)
    for i in range(0, fleet.n, 17):
        p = fleet.params[workload.ARCHETYPES[fleet.arch[i]]]
        hot = fleet.hot_blocks[i]
        rb = workload.RankBins(hot, hot * p['vol_over_hot'], p['alpha'],
                               p['cold'])
        n = fleet.intensity[i] * rate[i] * hot
        exp = rb.rwss(np.array([n]))[0]
        scan = fleet._scan_blocks(t_end, fleet.intensity * rate)[i]
        assert got[i] == pytest.approx(exp + scan, rel=0.02)


def test_rwss_formula_matches_the_generator():
    h, windows = 2048, 4
    profs = shapes.profiles_for('mix', int(2 * h * windows / 0.4),
                                windows * 3600.0, volume_blocks=1 << 16,
                                hot_blocks=h, scan_period=0)
    obs = calibrate.observed(profs, 5, windows)
    for v, pr in enumerate(profs):
        n = pr.requests / float(windows)
        rb = workload.RankBins(pr.hot_blocks, pr.volume_blocks,
                               pr.zipf_alpha, pr.cold_fraction)
        exp = rb.rwss(np.array([n]))[0]
        assert obs[v, :, 0].mean() == pytest.approx(exp, rel=0.12)


def test_command_line(tmp_path, capsys):
    out = tmp_path / 'fleet.json'
    assert cli.main(['--hosts', '6', '--vms-per-host', '4', '--days',
                     '0.25', '--json', str(out)]) == 0
    text = capsys.readouterr().out
    assert 'decision time per round' in text
    assert 'evacuation of host' in text
    data = json.loads(out.read_text())
    assert data['week']['decision_s']['max'] < K.GOAL_DECISION_S
    assert {e['which'] for e in data['evacuations']} == {'median',
                                                         'heaviest'}
