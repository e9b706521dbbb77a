# SPDX-License-Identifier: Apache-2.0
"""Evacuating one host: the planner's plan, replayed per strategy mix.

The plan comes from ``nova_ext.balancer.evacuation_plan.plan_evacuation``
(imported): the order of the VMs, their destinations and, for the
``plan`` mix, each volume's strategy from the cost model.  The other mixes
(all ``none``, all ``hybrid``, all ``firepan_if``) keep the plan's order
and destinations and replace the strategy; every mix is then scheduled
with the planner's own list scheduler (``max_concurrent`` out of the
source, ``per_destination`` into a destination) on the durations this
simulation gives each step: the guest's memory over the link share, the
fixed part of a migration, the cache copy (measured constants,
:mod:`bench.fleet.constants`).  Each VM's warm-up after its switchover is
:func:`bench.fleet.migration.simulate`.
"""

import numpy as np

from bench.fleet import constants as K
from bench.fleet import migration
from bench.fleet import sim
from bench.fleet import workload
from nova_ext.balancer import evacuation_plan
from nova_ext.balancer import model

MIXES = ('none', 'hybrid', 'firepan_if', 'plan')


def build_cloud(fleet, host_of, demand, capacity, engines=None):
    """Model objects of the whole cloud at one window."""
    hosts = [model.Host(sim.host_name(i), capacity)
             for i in range(fleet.hosts)]
    cached = sim.cached_bytes(demand, host_of, capacity, fleet.hosts)
    vms = []
    for i in range(fleet.n):
        vol = model.Volume('vol%06d' % i, demand_bytes=int(demand[i]),
                           cached_bytes=int(cached[i]), dirty_bytes=0,
                           block_size=K.BLOCK_SIZE,
                           engine='ucache' if engines is None
                           else engines[i])
        vms.append(model.Vm(sim.vm_id(i), sim.host_name(host_of[i]),
                            volumes=[vol], name=str(i)))
    return hosts, vms


def choose_sources(fleet, host_of, demand):
    """The hosts to evacuate, by label.

    Of the hosts with exactly vms_per_host VMs, the one of median cache
    load and the heaviest.
    """
    load = np.bincount(host_of, weights=demand, minlength=fleet.hosts)
    nvm = np.bincount(host_of, minlength=fleet.hosts)
    full = np.nonzero(nvm == fleet.vms_per_host)[0]
    if len(full) == 0:
        full = np.arange(fleet.hosts)
    order = full[np.argsort(load[full], kind='stable')]
    return {'median': int(order[len(order) // 2]),
            'heaviest': int(order[-1])}


def vm_states(fleet, steps, t):
    """A :class:`migration.VmState` per plan step's VM."""
    out = []
    rate = fleet.rate_factor(t)
    for step in steps:
        i = int(step.vm.name)
        p = fleet.params[workload.ARCHETYPES[fleet.arch[i]]]
        hot = fleet.hot_blocks[i]
        iops = (fleet.intensity[i] * hot / K.RWSS_WINDOW_S * rate[i])
        out.append(migration.VmState(
            hot, hot * p['vol_over_hot'], p['alpha'], p['cold'],
            step.vm.cached_bytes / K.BLOCK_SIZE, iops))
    return out


def run_mix(fleet, hosts, vms, source, mix, t, max_concurrent,
            per_destination, link_bps, origin_bps, horizon_s):
    plan = evacuation_plan.plan_evacuation(
        sim.host_name(source), hosts, vms, max_concurrent=max_concurrent,
        per_destination=per_destination, link_bps=link_bps,
        origin_bps=origin_bps)
    share = link_bps / max_concurrent
    strategies = []
    for step in plan.steps:
        (vstep,) = step.volumes
        s = vstep.strategy if mix == 'plan' else mix
        strategies.append(s)
        cached = step.vm.cached_bytes
        secs = sim.migration_seconds(s, cached, share)
        if s == 'cachemior':
            secs += cached / origin_bps
        step.est_seconds = secs
    # The planner's own scheduler, on this simulation's durations.
    evacuation_plan._schedule(plan.steps, max_concurrent, per_destination)
    states = vm_states(fleet, plan.steps, t)
    res = migration.simulate(states, strategies, share, origin_bps,
                             horizon_s=horizon_s)
    start = np.array([s.start_s for s in plan.steps])
    switch = start + K.VM_MEMORY_BYTES / share + K.MIGRATION_FIXED_S
    # Storage reads each VM adds until the horizon (from the evacuation's
    # start).
    extra = np.array([np.interp(horizon_s - switch[i], res['t'],
                                res['extra_reads_t'][i])
                      for i in range(len(states))])
    iops = np.array([v.iops for v in states])
    usual = float((iops * (1 - res['h0']) * K.BLOCK_SIZE).sum() * horizon_s)
    back = switch + res['recovery_s']
    # The VMs' mean bandwidth over before, from the evacuation's start.
    grid = np.linspace(0.0, min(horizon_s, 900.0), 901)
    mean_rel = np.zeros_like(grid)
    for i in range(len(states)):
        mean_rel += np.where(grid < switch[i], 1.0,
                             np.interp(grid - switch[i], res['t'],
                                       res['rel'][i]))
    mean_rel /= len(states)
    counts = {}
    for s in strategies:
        counts[s] = counts.get(s, 0) + 1
    return {
        'mix': mix, 'strategies': counts,
        'storage_extra_bytes': float(extra.sum()),
        'storage_usual_bytes': usual,
        'recovery_s_max': float(res['recovery_s'].max()),
        'recovery_s_median': float(np.median(res['recovery_s'])),
        'all_back_s': float(back.max()),
        'last_switch_s': float(switch.max()),
        'downtime_s_max': float(res['downtime_s'].max()),
        'link_bytes': float(res['link_bytes'].sum()),
        'cached_bytes': float(sum(v.cached_bytes for v in states)),
        'plan_storage_bytes': plan.storage_bytes if mix == 'plan' else None,
        'curve_t': grid, 'curve_mean_rel': mean_rel,
        'per_vm': [{'vm': st.vm.id, 'destination': st.destination,
                    'strategy': s, 'wave': st.wave, 'start_s': st.start_s,
                    'cached_bytes': st.vm.cached_bytes,
                    'recovery_s': float(r), 'extra_bytes': float(e)}
                   for st, s, r, e in zip(plan.steps, strategies,
                                          res['recovery_s'], extra)],
    }


def run(fleet, host_of, demand, capacity, window, which=('median',),
        max_concurrent=evacuation_plan.DEFAULT_MAX_CONCURRENT,
        per_destination=evacuation_plan.DEFAULT_PER_DESTINATION,
        link_bps=K.LINK_BPS, origin_bps=K.ORIGIN_BPS,
        horizon_s=K.EVACUATION_HORIZON_S, dmcache_fraction=0.0, seed=1):
    """Evacuate the chosen hosts under every mix; return a list of dicts.

    ``dmcache_fraction`` of the VMs (drawn with ``seed``) have their
    volume on the dmcache engine.
    """
    rng = np.random.Generator(np.random.PCG64([seed, 17]))
    engines = np.where(rng.random(fleet.n) < dmcache_fraction, 'dmcache',
                       'ucache')
    hosts, vms = build_cloud(fleet, host_of, demand, capacity, engines)
    sources = choose_sources(fleet, host_of, demand)
    t = (window + 1) * fleet.window_s
    out = []
    for label in which:
        source = sources[label]
        results = {}
        for mix in MIXES:
            results[mix] = run_mix(fleet, hosts, vms, source, mix, t,
                                   max_concurrent, per_destination,
                                   link_bps, origin_bps, horizon_s)
        base = results['none']['storage_extra_bytes']
        for r in results.values():
            r['storage_vs_none'] = (r['storage_extra_bytes'] / base
                                    if base > 0 else None)
        out.append({'host': sim.host_name(source), 'which': label,
                    'window': window,
                    'load_bytes': float(demand[host_of == source].sum()),
                    'capacity_bytes': capacity,
                    'max_concurrent': max_concurrent,
                    'per_destination': per_destination,
                    'dmcache_fraction': dmcache_fraction,
                    'link_bps': link_bps, 'origin_bps': origin_bps,
                    'horizon_s': horizon_s, 'mixes': results})
    return out
