# SPDX-License-Identifier: Apache-2.0
"""One run of the experiment of FirepanIF section 4.2, time-scaled.

For one strategy and cache size, the target VM (vmload, --verify):

1. runs on its bare shared-storage disk (``nocache_s``);
2. gets a cache on host A: the volume is attached there and the VM pauses,
   switches to the agent's export and resumes (``warm_s``);
3. migrates to host B through nova_ext.migration, phase by phase, the VM
   paused exactly as a hypervisor pauses it: before ``start`` for
   ``firepan`` (the copy is downtime, the point of firepan), after it for
   every other strategy; it resumes right after ``switchover``;
4. continues for ``total_s`` from the moment it was paused, while
   ``finish`` waits for the destination in the background.

Then the VM quits (its reads were all checked) and the destination volume
is detached.  The record keeps the per-second lines of the VM and of the
neighbours and the agents' counters; experiment metrics are computed by
fcdemo.report.
"""

import threading
import time

from fcdemo import vm as V
from nova_ext import migration

STATS_KEYS = ('reads', 'writes', 'read_bytes', 'write_bytes')
VOLUME_KEYS = ('reads', 'writes', 'read_hits', 'read_misses',
               'cached_blocks', 'origin_read_bytes', 'origin_write_bytes',
               'cache_write_bytes', 'block_size')


def _vol(client, vid):
    show = client.show_volume(vid)
    return {k: show.get(k) for k in VOLUME_KEYS}


def _sleep_until(bed, deadline):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        bed.check()
        time.sleep(min(left, 1.0))


class Finisher(threading.Thread):
    """migration.finish in the background: the VM keeps running."""

    def __init__(self, src, dst, mid):
        super().__init__(daemon=True)
        self.args = (src, dst, mid)
        self.result = self.error = self.t_done = None

    def run(self):
        try:
            self.result = migration.finish(*self.args, timeout_s=900)
        except Exception as exc:    # reported by the caller
            self.error = exc
        self.t_done = time.monotonic()


class DstSampler(threading.Thread):
    """The destination's counters every 0.1 s after the switch.

    Gives counts per VM read rather than per second: storage reads over
    the first K reads after the switch, and after the copy completed; and
    the hit ratio during the copy (the contention model's H).  A sample
    is (seconds since the pause, reads, origin_read_bytes, migration
    state, read_hits).
    """

    def __init__(self, dst, vid, mid, t0):
        super().__init__(daemon=True)
        self.dst, self.vid, self.mid, self.t0 = dst, vid, mid, t0
        self.samples = []
        self.error = None
        self._halt = threading.Event()

    def run(self):
        while not self._halt.is_set():
            try:
                show = self.dst.show_volume(self.vid)
                state = migration.status(self.dst, self.mid)['state']
            except Exception as exc:    # the volume goes at detach
                self.error = exc
                return
            self.samples.append((round(time.monotonic() - self.t0, 3),
                                 show['reads'], show['origin_read_bytes'],
                                 state, show['read_hits']))
            self._halt.wait(0.1)

    def stop(self):
        self._halt.set()
        self.join(10)


def _migrate(bed, vm, vid, strategy, rec):
    """Phases of nova_ext.migration around the VM; fills rec."""
    cfg = bed.cfg
    src = bed.agents['host-a'].client
    dst = bed.agents['host-b'].client
    t_begin = time.monotonic()
    prep = migration.prepare(
        src, dst, vid, strategy, rate_limit_mbps=cfg.link_mbps,
        link_mbps=cfg.link_mbps,
        origin_mbps=cfg.storage_bytes_per_s / 1e6)
    mid = prep['migration_id']
    resolved = prep['strategy']
    rec.update(resolved=resolved, reason=prep['reason'])
    # firepan needs the VM stopped before the copy starts: the source
    # refuses writes from `start` on, and the copy is the downtime.
    if resolved == 'firepan':
        t_pause = time.monotonic()
        rec['drain_ms'] = vm.pause()
        migration.start(src, dst, mid)
    else:
        migration.start(src, dst, mid)
        t_pause = time.monotonic()
        rec['drain_ms'] = vm.pause()
    rec['vm_at_switch'] = {k: vm.stats()[k] for k in STATS_KEYS}
    rec['src_at_switch'] = _vol(src, vid)
    try:
        vm.switch(prep['export_uri'])
    except V.VmError:
        migration.abort(src, dst, mid)
        raise
    migration.switchover(src, dst, mid)
    rec['downtime_ms'] = vm.resume()
    t_resume = time.monotonic()
    fin = Finisher(src, dst, mid)
    fin.start()
    rec['sampler'] = DstSampler(dst, vid, mid, t_pause)
    rec['sampler'].start()
    rec.update(t_begin=t_begin, t_pause=t_pause, t_resume=t_resume)
    return fin, src, dst


def run_one(bed, strategy, cache_size, run, seed):
    """The whole story for one strategy; returns the raw record."""
    cfg = bed.cfg
    vid = 't-%dm-%s-r%d' % (cache_size >> 20, strategy, run)
    uri = bed.disk(vid)
    rec = {'strategy': strategy, 'cache_size': cache_size, 'run': run,
           'seed': seed, 'volume_id': vid, 'flash': bed.flash}
    a = bed.agents['host-a'].client
    vm = V.Vm(bed.lab, vid, uri, cfg.job_size, seed=seed)
    try:
        rec['t_start'] = time.monotonic()
        _sleep_until(bed, rec['t_start'] + cfg.nocache_s)
        att = a.attach_volume(vid, uri, cache_size=cache_size,
                              write_policy=cfg.write_policy)
        vm.pause()
        vm.switch(att['export_uri'])
        vm.resume()
        rec['t_attach'] = time.monotonic()
        _sleep_until(bed, rec['t_attach'] + cfg.warm_s)
        fin, src, dst = _migrate(bed, vm, vid, strategy, rec)
        _sleep_until(bed, rec['t_pause'] + cfg.total_s + 1.2)
        rec['dst_at_end'] = _vol(dst, vid)
        sampler = rec.pop('sampler')
        sampler.stop()
        rec['dst_samples'] = sampler.samples
        final = vm.quit()
        rec['t_end'] = time.monotonic()
        rec['vm_final'] = final
        V.check_clean(vm, final)
        fin.join(900)
        if fin.error is not None or fin.result is None:
            raise V.VmError('migration of %s (%s) did not finish: %s'
                            % (vid, strategy, fin.error or 'timed out'))
        rec['migration'] = fin.result
        rec['migration_s'] = fin.t_done - rec['t_begin']
        rec['dst_after_finish'] = _vol(dst, vid)
        dst.detach_volume(vid)
    finally:
        if 'sampler' in rec:
            rec.pop('sampler').stop()
        if vm.proc.alive():
            bed.lab.stop(vm.proc)
        bed.remove_disk(vid)
    rec['vm_series'] = [_point(s, rec['t_pause']) for s in vm.series()]
    rec['neighbours'] = _neighbour_series(bed, rec)
    return rec


def _point(s, t0):
    return {'t': round(s['mono'] - t0, 3), 'read_mbps': s['read_mbps'],
            'write_mbps': s['write_mbps'], 'read_iops': s['read_iops'],
            'write_iops': s['write_iops'], 'state': s['state']}


def _neighbour_series(bed, rec):
    out = {}
    for host, nbs in bed.neighbours.items():
        out[host] = {nb.name: [_point(s, rec['t_pause']) for s in
                               nb.series(rec['t_start'], rec['t_end'])]
                     for nb in nbs}
    return out
