# SPDX-License-Identifier: Apache-2.0
"""A week of the fleet, window by window, with and without the balancer.

Every window each VM's predicted demand is its RWSS_1 over the trailing
hour (:mod:`bench.fleet.workload`), each host's cache load the sum over
its VMs; the balancer of ``nova_ext.balancer.decision`` (imported, run on
the model objects of ``nova_ext.balancer.model``) observes the cloud and
its decisions are applied: the VM's host changes, its migration (strategy
from ``nova_ext.costmodel.choose_strategy``, duration from
:mod:`bench.fleet.migration`) keeps it ``migrating`` until it ends.  The
same VMs on the placement they started with are the "without balancer"
run (the same demand series, so the two differ only by the moves).
"""

import time

import numpy as np

from bench.fleet import constants as K
from bench.fleet import migration
from nova_ext.balancer import decision
from nova_ext.balancer import model
from nova_ext import costmodel


def host_name(i):
    return 'host%04d' % i


def vm_id(i):
    return 'vm%06d' % i


def capacity_for(fleet, peak_utilisation=K.PEAK_UTILISATION):
    """One cache size for every host, rounded to a GiB.

    The fleet's mean load at its busiest hour of the first day over the
    peak utilisation wanted.
    """
    per_hour = max(1, int(round(3600.0 / fleet.window_s)))
    ws = range(0, min(fleet.windows, 24 * per_hour), per_hour)
    peak = max(fleet.demand_bytes(w).sum() for w in ws) / fleet.hosts
    return int(max(1, round(peak / peak_utilisation / K.GIB))) * K.GIB


def cached_bytes(demand, host_of, capacity, hosts):
    """What each VM has cached.

    Its demand, cut in proportion when its host's demand exceeds the cache
    (the agent's shares, doc/reference/allocation.rst).
    """
    load = np.bincount(host_of, weights=demand, minlength=hosts)
    cut = np.minimum(1.0, capacity / np.maximum(load, 1.0))
    return demand * cut[host_of]


def utilisation(demand, host_of, capacity, hosts):
    return np.bincount(host_of, weights=demand, minlength=hosts) / capacity


def _stats(u, threshold):
    return (float(u.var()), float(u.max()), int((u > threshold).sum()),
            int((u > 1.0).sum()))


def migration_seconds(strategy, cached, link_bps, memory=K.VM_MEMORY_BYTES):
    """From the start of a live migration until the cache is in place."""
    return (memory / link_bps + K.MIGRATION_FIXED_S
            + migration.copy_seconds(strategy, cached, link_bps))


def run_week(fleet, capacity=None, balance=True, one_move_per_round=False,
             max_moves=None,
             threshold=decision.DEFAULT_THRESHOLD,
             windows=decision.DEFAULT_WINDOWS,
             cooldown_windows=decision.DEFAULT_COOLDOWN_WINDOWS,
             link_bps=K.LINK_BPS, origin_bps=K.ORIGIN_BPS,
             snapshot_window=None, progress=None):
    """Run the week; return a dict of series and summaries.

    ``snapshot_window``: also return the placement and demand at the end
    of that window (the evacuation experiment starts from it).
    """
    n_hosts = fleet.hosts
    if capacity is None:
        capacity = capacity_for(fleet)
    hosts = [model.Host(host_name(i), capacity) for i in range(n_hosts)]
    host_index = {h.name: i for i, h in enumerate(hosts)}
    host_of0 = np.arange(fleet.n) // fleet.vms_per_host
    host_of = host_of0.copy()
    vms = [model.Vm(vm_id(i), host_name(host_of[i]), demand_bytes=0,
                    cached_bytes=0, dirty_bytes=0)
           for i in range(fleet.n)]
    vm_index = {vm.id: i for i, vm in enumerate(vms)}
    balancer = decision.Balancer(threshold=threshold, windows=windows,
                                 cooldown_windows=cooldown_windows)
    nw = fleet.windows
    var_b = np.zeros(nw)
    var_s = np.zeros(nw)
    max_b = np.zeros(nw)
    max_s = np.zeros(nw)
    over_b = np.zeros(nw, dtype=np.int64)
    over_s = np.zeros(nw, dtype=np.int64)
    full_b = np.zeros(nw, dtype=np.int64)
    full_s = np.zeros(nw, dtype=np.int64)
    moves = np.zeros(nw, dtype=np.int64)
    decide_s = []
    in_flight = []              # (end time, vm index)
    strategies = {}
    moved_bytes = 0.0
    total_downtime = 0.0
    snapshot = None
    log = []
    t_start = time.monotonic()
    for w in range(nw):
        now = w * fleet.window_s
        demand = fleet.demand_bytes(w)
        if balance:
            for vm, d in zip(vms, demand.astype(np.int64).tolist()):
                vm.demand_bytes = d
            still = []
            for end, i in in_flight:
                if end > now:
                    still.append((end, i))
                else:
                    vms[i].migrating = False
            in_flight = still
            t0 = time.perf_counter()
            if one_move_per_round:
                one = balancer.observe(w, hosts, vms)
                decided = [one] if one is not None else []
            else:
                decided = balancer.observe_many(w, hosts, vms,
                                                max_moves=max_moves)
            decide_s.append(time.perf_counter() - t0)
            if decided:
                cached = cached_bytes(demand, host_of, capacity, n_hosts)
            for dec in decided:
                i = vm_index[dec.vm.id]
                vol = model.Volume(dec.vm.id, demand_bytes=demand[i],
                                   cached_bytes=cached[i])
                strategy, _ = costmodel.choose_strategy(
                    vol.as_volume_show(), link_bps=link_bps,
                    origin_bps=origin_bps)
                strategies[strategy] = strategies.get(strategy, 0) + 1
                secs = migration_seconds(strategy, cached[i], link_bps)
                if strategy in migration.COPYING:
                    moved_bytes += cached[i]
                total_downtime += migration.downtime_s(strategy, cached[i],
                                                       link_bps)
                host_of[i] = host_index[dec.destination]
                dec.vm.host = dec.destination
                dec.vm.last_moved_window = w
                dec.vm.migrating = True
                in_flight.append((now + fleet.window_s + secs, i))
                if len(log) < 20:
                    log.append(dec.as_dict())
            moves[w] = len(decided)
        ub = utilisation(demand, host_of, capacity, n_hosts)
        us = utilisation(demand, host_of0, capacity, n_hosts)
        var_b[w], max_b[w], over_b[w], full_b[w] = _stats(ub, threshold)
        var_s[w], max_s[w], over_s[w], full_s[w] = _stats(us, threshold)
        if snapshot_window is not None and w == snapshot_window:
            snapshot = {'window': w, 'host_of': host_of.copy(),
                        'demand': demand.copy()}
        if progress and (w + 1) % progress == 0:
            print('  window %d/%d, %.0f s, %d moves so far'
                  % (w + 1, nw, time.monotonic() - t_start,
                     int(moves.sum())), flush=True)
    elapsed = time.monotonic() - t_start
    hours = nw * fleet.window_s / 3600.0
    per_hour = moves.reshape(-1, int(round(3600.0 / fleet.window_s))).sum(
        axis=1) if nw * fleet.window_s % 3600 == 0 else moves
    ds = np.array(decide_s) if decide_s else np.zeros(1)
    return {
        'capacity_bytes': capacity, 'windows': nw,
        'window_s': fleet.window_s, 'elapsed_s': elapsed,
        'balance': balance, 'one_move_per_round': one_move_per_round,
        'max_moves': max_moves,
        'variance': {'balanced': var_b, 'static': var_s},
        'max_utilisation': {'balanced': max_b, 'static': max_s},
        'hosts_over_threshold': {'balanced': over_b, 'static': over_s},
        'hosts_over_capacity': {'balanced': full_b, 'static': full_s},
        'moves': moves, 'moves_per_hour': per_hour,
        'migrations': int(moves.sum()),
        'migrations_per_hour_mean': float(moves.sum() / hours),
        'decision_s': ds,
        'strategies': strategies, 'moved_bytes': moved_bytes,
        'downtime_s_total': total_downtime,
        'host_of': host_of, 'vms': vms, 'hosts': hosts,
        'snapshot': snapshot,
        'first_decisions': log,
    }
