#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load and soak: many volumes, concurrent I/O and migrations, under LSan.

Two agents built with AddressSanitizer and LeakSanitizer
(``make -C fcache_agent asan``).  ``--volumes`` volumes (sparse files
under the run's directory, inside the agents' ``origin_prefixes``) are
attached to the first agent with mixed write policies; each one is driven
by an oracle-checked workload (libnbd aio, ``--depth`` requests in flight,
every read compared with the model of the disk).  Waves of
``--concurrent`` live migrations (``nova_ext.migration``: prepare, start,
switchover, finish; strategies taking turns: hybrid, firepan_if,
cloudcache, none) move a group of volumes to the second agent, the next
wave brings them back, and so on for ``--seconds``; each workload pauses,
moves to the destination's export and resumes, as a VM does.

At the end every volume is read whole and checked, detached, and both
agents stop cleanly (SIGTERM), which is when LeakSanitizer reports.

Reported: requests done and lost (no completion, or an error: must be 0),
oracle mismatches (must be 0), client-side read/write latency
percentiles, the agents' VmRSS and memory per volume (VmRSS / volumes,
the growth over the idle agent / volumes, and the agent's own
``memory_bytes`` accounting), migrations completed and failed, and the
LeakSanitizer verdict of both agents.  Results go to
``results/soak-<timestamp>.json``.  Run with ``bench/run-soak.sh``.
"""

import argparse
import array
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback

import nbd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fcache_testkit import harness  # noqa: E402
from fcache_testkit import migration_util as mu  # noqa: E402
from fcache_testkit import oracle as om  # noqa: E402
from nova_ext import migration  # noqa: E402

MiB = 1 << 20
STRATEGIES = ('hybrid', 'firepan_if', 'cloudcache', 'none')
POLICIES = ('write_back', 'write_through', 'read_only')
# A leak report, or LSan unable to run (under ptrace, for one).
LSAN = 'LeakSanitizer'


class PooledHandle(object):
    """A libnbd handle whose aio reads and writes use pooled buffers.

    Debian 12's python3-libnbd (1.14) keeps a reference to the buffer of
    every ``aio_pread`` and ``aio_pwrite`` for ever: a workload that
    allocates one per request grows by the bytes it moves (about 100 MiB/s
    here).  Buffers taken from a pool, one list per length, and returned at
    completion, bound that to the pool's peak.  Everything else goes to the
    real handle.
    """

    def __init__(self, h, pool):
        self._h = h
        self._pool = pool

    def __getattr__(self, name):
        return getattr(self._h, name)

    def _take(self, n):
        free = self._pool.get(n)
        return free.pop() if free else bytearray(n)

    def _give(self, ba):
        self._pool.setdefault(len(ba), []).append(ba)

    def aio_pread(self, buf, offset, completion=None, flags=0):
        ba = self._take(len(buf))

        def cb(err):
            # What the workload reads back from ``buf`` afterwards.
            buf._o = bytearray(ba)
            buf._init = True
            self._give(ba)
            return completion(err) if completion else 1
        try:
            return self._h.aio_pread(nbd.Buffer.from_buffer(ba), offset,
                                     completion=cb, flags=flags)
        except nbd.Error:
            self._give(ba)
            raise

    def aio_pwrite(self, buf, offset, completion=None, flags=0):
        ba = self._take(len(buf))
        ba[:] = buf.to_buffer()

        def cb(err):
            self._give(ba)
            return completion(err) if completion else 1
        try:
            return self._h.aio_pwrite(nbd.Buffer.from_buffer(ba), offset,
                                      completion=cb, flags=flags)
        except nbd.Error:
            self._give(ba)
            raise


class TimedWorkload(mu.CountingWorkload):
    """A counting oracle workload that keeps each request's latency.

    The latency is taken on the client: from the request's issue to its
    completion callback (inside ``poll``), so it includes the time the
    Python client takes to come back to the handle.
    """

    def __init__(self, *a, **kw):
        super(TimedWorkload, self).__init__(*a, **kw)
        self.latency = {'read': array.array('d'), 'write': array.array('d'),
                        'other': array.array('d')}
        self.ok_completions = 0

    def _completion(self, req):
        lat = self.latency.get(req.kind, self.latency['other'])

        def cb(err):
            lat.append(time.monotonic() - req.issued)
            self.completed.append((req, err.value))
            if not err.value:
                self.ok_completions += 1
            return 1
        return cb

    @property
    def issued(self):
        return sum(v for k, v in self.counts.items() if k != 'fua')

    @property
    def lost_requests(self):
        """Requests issued without a completion, or completed in error."""
        return self.issued - self.ok_completions


class SoakVm(mu.Vm):
    """The VM stand-in of migration_util, with a timed workload."""

    def __init__(self, uri, oracle, seed, name, agent, run_bound,
                 **workload_kw):
        super(SoakVm, self).__init__(uri, oracle, seed, name=name)
        self.pool = {}
        self.wl = TimedWorkload(PooledHandle(self.h, self.pool), oracle,
                                seed=seed, **workload_kw)
        self.agent = agent
        self.run_bound = run_bound
        self.migrating = False

    def move(self, uri):
        super(SoakVm, self).move(uri)
        self.wl.h = PooledHandle(self.h, self.pool)
        return self

    def _run(self):
        try:
            self.wl.run(stop=self.stop_event, timeout=self.run_bound)
        except BaseException as exc:      # reported by pause()
            self.exc = exc


def rss_kib(pid):
    """VmRSS and VmHWM of a process, in KiB."""
    out = {}
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            key = line.split(':', 1)[0]
            if key in ('VmRSS', 'VmHWM'):
                out[key] = int(line.split()[1])
    return out


def percentiles(values, ps=(50, 99, 99.9)):
    """Nearest-rank percentiles of ``values`` in milliseconds."""
    v = sorted(values)
    if not v:
        return dict(('p%s' % p, None) for p in ps)
    out = {}
    for p in ps:
        i = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
        out['p%s' % p] = round(v[i] * 1000.0, 3)
    out['max'] = round(v[-1] * 1000.0, 3)
    out['n'] = len(v)
    return out


class Sampler(object):
    """Samples both agents' VmRSS every ``interval`` seconds."""

    def __init__(self, agents, interval=2.0):
        self.agents = agents
        self.interval = interval
        self.samples = []     # (t, {name: (rss_kib, volumes)})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.t0 = time.monotonic()

    def sample(self):
        row = {}
        for name, a, count in self.agents:
            try:
                row[name] = (rss_kib(a.pid)['VmRSS'], count())
            except (OSError, KeyError):
                continue
        self.samples.append((round(time.monotonic() - self.t0, 1), row))
        return row

    def _loop(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)


class Soak(object):
    def __init__(self, workdir, binary, volumes=64, concurrent=8,
                 seconds=180, volume_size=16 * MiB, volume_cache=4 * MiB,
                 depth=4, rate_mbps=40, pause_s=1.0, migrate=True,
                 migrating=None, prepare_together=False, log=print):
        # migrating: how many volumes (the first ones) take turns in the
        # waves; all of them by default.
        self.migrating = migrating or volumes
        assert self.migrating % concurrent == 0 and \
            self.migrating <= volumes, 'migrating: a multiple of concurrent'
        self.dir = workdir
        self.binary = binary
        self.nvol = volumes
        self.concurrent = concurrent
        self.seconds = seconds
        self.volume_size = volume_size
        self.volume_cache = volume_cache
        self.depth = depth
        self.rate_mbps = rate_mbps
        self.pause_s = pause_s
        self.migrate_volumes = migrate
        self.prepare_together = prepare_together
        self.log = log
        self.vms = {}
        self.migrations = []
        self.lock = threading.Lock()
        self.counts = {}
        self.res = {}

    # -- set-up -----------------------------------------------------------

    def _agent(self, name):
        cache = '%dM' % (self.nvol * self.volume_cache // MiB + 16)
        return harness.Agent(self.binary, self.dir, name=name,
                             cache_size=cache, log_level='info')

    def setup(self):
        self.a = self._agent('a').start()
        self.b = self._agent('b').start()
        self.counts = {'a': 0, 'b': 0}
        idle = {'a': rss_kib(self.a.pid)['VmRSS'],
                'b': rss_kib(self.b.pid)['VmRSS']}
        self.res['rss_idle_kib'] = idle
        t0 = time.monotonic()
        bound = self.seconds + 900
        for i in range(self.nvol):
            vid = 'vol%02d' % i
            path = os.path.join(self.dir, '%s.img' % vid)
            content = harness.make_origin_file(path, self.volume_size,
                                               seed=i, filled_fraction=0.25)
            orc = om.Oracle(content)
            del content
            policy = POLICIES[i % len(POLICIES)]
            r = self.a.attach(vid, path, cache_size=self.volume_cache,
                              write_policy=policy)
            vm = SoakVm(r['export_uri'], orc, seed=1000 + i, name=vid,
                        agent=self.a, run_bound=bound, depth=self.depth)
            vm.policy = policy
            self.vms[vid] = vm
        self.counts['a'] = self.nvol
        self.res['setup_s'] = round(time.monotonic() - t0, 1)
        self.sampler = Sampler((
            ('a', self.a, lambda: self.counts['a']),
            ('b', self.b, lambda: self.counts['b'])))
        for vm in self.vms.values():
            vm.resume()
        self.sampler.start()

    # -- migrations -------------------------------------------------------

    def migrate(self, vid, strategy, prepared=None):
        vm = self.vms[vid]
        src = vm.agent
        dst = self.b if src is self.a else self.a
        rec = {'volume': vid, 'strategy': strategy, 'policy': vm.policy,
               'from': os.path.basename(src.dir),
               'to': os.path.basename(dst.dir), 'ok': False}
        s, d = src.client(timeout=60), dst.client(timeout=60)
        t0 = time.monotonic()
        mid = None
        moved = switched = False
        src_uri = vm.uri
        try:
            p = migration.prepare(s, d, vid, strategy,
                                  rate_limit_mbps=self.rate_mbps)
            mid = p['migration_id']
            if prepared is not None:
                # Every migration of the wave prepared before any starts.
                prepared.wait(120)
            migration.start(s, d, mid)
            # The VM stops on the source, drains, and continues on the
            # destination, whose gate holds its writes until the switch.
            vm.pause()
            vm.move(p['export_uri'])
            moved = True
            vm.resume()
            migration.switchover(s, d, mid)
            switched = True
            summ = migration.finish(s, d, mid, timeout_s=120)
            rec.update(ok=True, downtime_s=summ.get('downtime_s'),
                       duration_s=round(time.monotonic() - t0, 3))
            with self.lock:
                vm.agent = dst
                self.counts[rec['from']] -= 1
                self.counts[rec['to']] += 1
        except Exception as exc:
            if prepared is not None and mid is None:
                prepared.abort()    # the others will not wait for this one
            rec['error'] = '%s: %s' % (type(exc).__name__, exc)
            rec['trace'] = traceback.format_exc()[-2000:]
            if mid and not switched:
                try:
                    migration.abort(s, d, mid)
                except Exception:
                    pass
                if moved:
                    try:
                        vm.pause()
                        vm.move(src_uri)
                        vm.resume()
                    except Exception as exc2:
                        rec['error'] += '; moving back: %s' % exc2
            # Past the switchover the volume stays where it is, unmoved.
            vm.migrating = 'stuck' if switched else False
        with self.lock:
            self.migrations.append(rec)
        return rec

    def wave(self, n):
        groups = self.migrating // self.concurrent
        g = (n // 2) % groups
        vids = ['vol%02d' % (g * self.concurrent + k)
                for k in range(self.concurrent)]
        vids = [v for v in vids if self.vms[v].migrating is False]
        threads = []
        barrier = None
        if self.prepare_together:
            barrier = threading.Barrier(len(vids))
        for k, vid in enumerate(vids):
            strategy = STRATEGIES[(n + k) % len(STRATEGIES)]
            t = threading.Thread(target=self.migrate,
                                 args=(vid, strategy, barrier),
                                 daemon=True, name='migr-%s' % vid)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(300)
            if t.is_alive():
                raise AssertionError('a migration did not end within 300 s')

    # -- the run ----------------------------------------------------------

    def run(self):
        self.setup()
        t0 = time.monotonic()
        waves = 0
        try:
            while time.monotonic() - t0 < self.seconds:
                if not self.migrate_volumes:
                    time.sleep(1)
                    self._check_vms()
                    continue
                self.wave(waves)
                waves += 1
                time.sleep(self.pause_s)
                self._check_vms()
                ok = sum(1 for m in self.migrations if m['ok'])
                self.log('  %5.0f s: %d waves, %d/%d migrations done, '
                         'A %d volumes, B %d' % (
                             time.monotonic() - t0, waves, ok,
                             len(self.migrations), self.counts['a'],
                             self.counts['b']))
        finally:
            self.res['soak_s'] = round(time.monotonic() - t0, 1)
            self.res['waves'] = waves
            self.res['rss_end_kib'] = self.sampler.sample()
            self.res['agent_memory'] = self._agent_memory()
            self.sampler.stop()
            self.finish()
        return self.results()

    def _check_vms(self):
        for vm in self.vms.values():
            if vm.running and not vm.thread.is_alive():
                raise AssertionError('%s: the workload stopped: %s' % (
                    vm.name, vm.exc))

    def _agent_memory(self):
        """The agents' own accounting, with VmRSS, at the end of the soak."""
        out = {}
        for name, a in (('a', self.a), ('b', self.b)):
            st = a.status()
            vols = [a.show(v['volume_id']) for v in st['volumes']]
            mem = sum(v.get('memory_bytes', 0) for v in vols)
            n = len(vols)
            out[name] = {
                'volumes': n,
                'vmrss_kib': rss_kib(a.pid)['VmRSS'],
                'vmhwm_kib': rss_kib(a.pid)['VmHWM'],
                'table_memory_bytes': st.get('table_memory_bytes'),
                'volume_memory_bytes': mem,
                'volume_memory_bytes_per_volume': mem // n if n else None,
            }
        return out

    def finish(self):
        """Drain, verify each volume whole, detach, stop: LSan's verdict."""
        problems = []
        for vm in self.vms.values():
            try:
                vm.pause(timeout=60)
            except Exception as exc:
                problems.append('%s: %s' % (vm.name, exc))
        verify = {}
        t0 = time.monotonic()
        for vid, vm in sorted(self.vms.items()):
            try:
                verify[vid] = [repr(m) for m in om.verify_all(
                    PooledHandle(vm.h, vm.pool), vm.oracle,
                    what='final verify')]
            except Exception as exc:
                verify[vid] = ['verify failed: %s' % exc]
            om.close(vm.h)
        self.res['verify_s'] = round(time.monotonic() - t0, 1)
        self.res['verify_mismatches'] = dict(
            (k, v) for k, v in verify.items() if v)
        for vid, vm in sorted(self.vms.items()):
            try:
                vm.agent.detach(vid)
            except Exception as exc:
                problems.append('detach %s: %s' % (vid, exc))
        for name, a in (('a', self.a), ('b', self.b)):
            rc = None
            try:
                rc = a.stop(timeout=120, check=False)
            except AssertionError as exc:
                problems.append(str(exc)[:2000])
            log = a.log()
            reports = harness.sanitizer_reports(log)
            i = log.find(LSAN)
            self.res['agent_%s' % name] = {
                'exit_status': rc,
                'leak_report': i >= 0,
                'sanitizer_reports': reports[:20],
                'leak_excerpt': log[i:i + 6000] if i >= 0 else '',
                'log': a.logfile,
            }
        self.res['problems'] = problems

    # -- results -----------------------------------------------------------

    def results(self):
        r = dict(self.res)
        wls = [vm.wl for vm in self.vms.values()]
        lat = {}
        for kind in ('read', 'write', 'other'):
            vals = array.array('d')
            for wl in wls:
                vals.extend(wl.latency[kind])
            lat[kind] = percentiles(vals)
        r['latency_ms'] = lat
        r['requests'] = {
            'done': sum(wl.completions for wl in wls),
            'issued': sum(wl.issued for wl in wls),
            'lost': sum(wl.lost_requests for wl in wls),
            'errors': sum(len(wl.errors) for wl in wls),
            'error_examples': [e for wl in wls for e in wl.errors][:20],
            'mismatches': sum(len(wl.mismatches) for wl in wls),
            'mismatch_examples': [repr(m) for wl in wls
                                  for m in wl.mismatches][:10],
            'read_bytes': sum(wl.read_bytes for wl in wls),
            'write_bytes': sum(wl.write_bytes for wl in wls),
        }
        r['requests']['per_s'] = round(
            r['requests']['done'] / max(1e-9, r.get('soak_s', 1)), 1)
        ok = [m for m in self.migrations if m['ok']]
        r['migrations'] = {
            'completed': len(ok),
            'failed': len(self.migrations) - len(ok),
            'by_strategy': dict(
                (s, sum(1 for m in ok if m['strategy'] == s))
                for s in STRATEGIES),
            'failures': [m for m in self.migrations if not m['ok']][:10],
            'failure_reasons': {},
            'duration_s_median': statistics.median(
                [m['duration_s'] for m in ok]) if ok else None,
            'duration_s_max': max([m['duration_s'] for m in ok] or [None]),
        }
        for f in self.migrations:
            if not f['ok']:
                why = f['error'][:100]
                r['migrations']['failure_reasons'][why] = \
                    r['migrations']['failure_reasons'].get(why, 0) + 1
        idle = r['rss_idle_kib']['a']
        end, nend = r['rss_end_kib'].get('a', (0, 1))
        peak = max((row['a'][0] for _, row in self.sampler.samples
                    if 'a' in row), default=0)
        r['memory'] = {
            'a_idle_kib': idle,
            'a_peak_kib': peak,
            'a_end_kib': end,
            'a_end_volumes': nend,
            'rss_per_volume_kib': round(end / float(nend), 1),
            'rss_growth_per_volume_kib': round((end - idle) / float(nend), 1),
            'peak_growth_per_volume_kib': round(
                (peak - idle) / float(self.nvol), 1),
            'samples': self.sampler.samples,
        }
        r['client_rss_kib'] = rss_kib(os.getpid())
        r['leak_free'] = not any(r['agent_%s' % n]['leak_report'] or
                                 r['agent_%s' % n]['sanitizer_reports'] or
                                 r['agent_%s' % n]['exit_status'] != 0
                                 for n in ('a', 'b'))
        r['config'] = dict(volumes=self.nvol, concurrent=self.concurrent,
                           migrating=self.migrating,
                           prepare_together=self.prepare_together,
                           seconds=self.seconds,
                           volume_size=self.volume_size,
                           volume_cache=self.volume_cache, depth=self.depth,
                           rate_mbps=self.rate_mbps,
                           strategies=STRATEGIES, policies=POLICIES)
        return r


def table(r):
    q = r['requests']
    m = r['migrations']
    mem = r['memory']
    am = r['agent_memory']['a']
    lines = [
        ('soak', '%s s, %d waves, %d volumes (%d migrating), %d concurrent '
         'migrations' % (r['soak_s'], r['waves'], r['config']['volumes'],
                         r['config']['migrating'],
                         r['config']['concurrent'])),
        ('requests done', '%d (%.0f/s), %d MiB read, %d MiB written' % (
            q['done'], q['per_s'], q['read_bytes'] // MiB,
            q['write_bytes'] // MiB)),
        ('requests lost', '%d (%d errors)' % (q['lost'], q['errors'])),
        ('oracle mismatches', '%d during, %d volumes at the final verify' % (
            q['mismatches'], len(r['verify_mismatches']))),
    ]
    for kind in ('read', 'write'):
        p = r['latency_ms'][kind]
        lines.append(('%s latency ms' % kind,
                      'p50 %s  p99 %s  p99.9 %s  max %s' % (
                          p['p50'], p['p99'], p['p99.9'], p['max'])))
    lines += [
        ('migrations', '%d completed, %d failed (%s)' % (
            m['completed'], m['failed'], ', '.join(
                '%s %d' % kv for kv in sorted(m['by_strategy'].items())))),
    ]
    for why, n in sorted(m['failure_reasons'].items()):
        lines.append(('  failed: %d' % n, why))
    lines += [
        ('agent A VmRSS', 'idle %d KiB, peak %d, end %d with %d volumes' % (
            mem['a_idle_kib'], mem['a_peak_kib'], mem['a_end_kib'],
            mem['a_end_volumes'])),
        ('memory per volume', '%.0f KiB VmRSS/volumes, %.0f KiB over idle; '
         'agent accounting %s B (+ table %s B)' % (
             mem['rss_per_volume_kib'], mem['rss_growth_per_volume_kib'],
             am['volume_memory_bytes_per_volume'],
             am['table_memory_bytes'])),
        ('LeakSanitizer', 'A: %s, B: %s' % tuple(
            'exit %s, %s' % (r['agent_%s' % n]['exit_status'],
                             'LEAK' if r['agent_%s' % n]['leak_report']
                             else 'no leak')
            for n in ('a', 'b'))),
    ]
    w = max(len(k) for k, _ in lines)
    return '\n'.join('%-*s  %s' % (w, k, v) for k, v in lines)


def release_memory(workdir, args):
    """VmRSS per volume of the release build: the same volumes and I/O.

    Without migrations, for ``--memory-seconds``: ASan's allocator keeps
    freed memory in quarantine (256 MiB by default), so the sanitized
    agent's VmRSS says little about what a volume costs.
    """
    binary = os.path.join(workdir, 'fcft-agent-release')
    shutil.copy2(os.path.join(ROOT, 'fcache_agent', 'build', 'fcache-agent'),
                 binary)
    soak = Soak(workdir, binary, volumes=args.volumes,
                concurrent=args.concurrent, seconds=args.memory_seconds,
                volume_size=args.volume_mib * MiB,
                volume_cache=args.cache_mib * MiB, depth=args.depth,
                migrate=False)
    try:
        r = soak.run()
    finally:
        for a in (getattr(soak, 'a', None), getattr(soak, 'b', None)):
            if a is not None:
                a.kill()
    return {'seconds': r['soak_s'], 'requests_done': r['requests']['done'],
            'lost': r['requests']['lost'],
            'mismatches': r['requests']['mismatches'],
            'memory': dict((k, v) for k, v in r['memory'].items()
                           if k != 'samples'),
            'agent_memory': r['agent_memory']['a']}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--volumes', type=int, default=64)
    ap.add_argument('--concurrent', type=int, default=8)
    ap.add_argument('--seconds', type=float, default=240)
    ap.add_argument('--volume-mib', type=int, default=16)
    ap.add_argument('--cache-mib', type=int, default=4)
    ap.add_argument('--depth', type=int, default=4)
    ap.add_argument('--migrating', type=int, default=None,
                    help='how many of the volumes take turns in the waves '
                    '(default: all)')
    ap.add_argument('--rate-mbps', type=float, default=40)
    ap.add_argument('--memory-seconds', type=float, default=30,
                    help='then the release build, same volumes and I/O, no '
                    'migrations, for its VmRSS per volume (0: skip)')
    ap.add_argument('--prepare-together', action='store_true',
                    help="each wave's migrations all prepared before any "
                    'starts (as Nova prepares every volume of a VM first)')
    ap.add_argument('--keep', action='store_true',
                    help='keep the run directory (logs, origins)')
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix='fcsoak-')
    print('soak: run directory %s' % workdir)
    binary = harness.ensure_asan_agent(workdir)
    soak = Soak(workdir, binary, volumes=args.volumes,
                concurrent=args.concurrent, seconds=args.seconds,
                volume_size=args.volume_mib * MiB,
                volume_cache=args.cache_mib * MiB, depth=args.depth,
                rate_mbps=args.rate_mbps, migrating=args.migrating,
                prepare_together=args.prepare_together)
    try:
        r = soak.run()
    finally:
        for a in (getattr(soak, 'a', None), getattr(soak, 'b', None)):
            if a is not None:
                a.kill()
    print(table(r))
    if args.memory_seconds > 0:
        print('soak: the release build, %d volumes, %.0f s of I/O, for its '
              'memory' % (args.volumes, args.memory_seconds))
        rel = os.path.join(workdir, 'release')
        os.makedirs(rel)
        r['release_memory'] = m = release_memory(rel, args)
        print('release build VmRSS: idle %d KiB, end %d KiB with %d volumes:'
              ' %.0f KiB per volume, %.0f KiB over idle; %d requests, %d '
              'lost, %d mismatches' % (
                  m['memory']['a_idle_kib'], m['memory']['a_end_kib'],
                  m['memory']['a_end_volumes'],
                  m['memory']['rss_per_volume_kib'],
                  m['memory']['rss_growth_per_volume_kib'],
                  m['requests_done'], m['lost'], m['mismatches']))
    os.makedirs(os.path.join(ROOT, 'results'), exist_ok=True)
    out = os.path.join(ROOT, 'results', 'soak-%s.json' %
                       time.strftime('%Y%m%d-%H%M%S'))
    with open(out, 'w') as f:
        json.dump(r, f, indent=1, sort_keys=True)
    print('results: %s' % out)
    good = (r['requests']['lost'] == 0 and not r['requests']['errors'] and
            r['requests']['mismatches'] == 0
            and not r['verify_mismatches'] and r['leak_free'] and
            r['migrations']['failed'] == 0 and not r['problems'])
    if good and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print('soak: run directory kept: %s' % workdir)
    return 0 if good else 1


if __name__ == '__main__':
    sys.exit(main())
