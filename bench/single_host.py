#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fcache demo: a host-side cache in front of slow shared storage.

Runs the FIO workload of Figure 5 of the FirepanIF paper (randrw 80:20,
4 KiB, 4 jobs x iodepth 32, zoned:50/5:30/15:20/80, randrepeat=0,
norandommap), scaled down to a few hundred MiB, over NBD in three phases:

  no-cache  fio straight against the shared storage (nbdkit, rate-limited)
  cold      the volume attached to fcache-agent (read_only, as in the
            paper) with an empty cache; fio against the agent's export
  warm      the same again, with the cache that the cold phase filled

and prints, for each phase, read/write IOPS, MB/s, the cache hit ratio and
the data read from the shared storage.  Writes .demo/results.json and a
plot .demo/demo.png.  Single host, real fio, no migration: the cache
itself against the bare storage.  The full story (no cache, cold, warm,
migrate with each strategy, continue) is tools/run-demo.sh, i.e.
tools/testbed.py --quick.  Run with .venv/bin/python bench/single_host.py;
`--help` for knobs.
"""

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time

# The testbed's lab (tools/fcdemo) starts nbdkit, agents and VMs.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'tools'))

from fcdemo import lab as L  # noqa: E402

PHASES = ('no-cache', 'cold', 'warm')
VOLUME_ID = 'demo-vol'

JOB_TEMPLATE = """\
; Figure 5 of "FirepanIF" (Appl. Sci. 2020, 10, 1014), scaled down:
; size per job {size} instead of 5G, time limited, NBD instead of libaio.
; The four jobs use disjoint areas of one volume (the paper: 4 files).
[global]
name=workload
ioengine=nbd
uri=${{FCACHE_URI}}
rw=randrw
rwmixread=80
rwmixwrite=20
direct=1
time_based=1
runtime=${{FCACHE_RUNTIME}}
norandommap
random_distribution=zoned:50/5:30/15:20/80
iodepth=32
size={size}
randrepeat=0
randseed=${{FCACHE_SEED}}
group_reporting=1
write_iops_log=${{FCACHE_LOG}}
log_avg_msec=1000
"""


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--seconds', type=int, default=25,
                   help='length of each phase (default: %(default)s)')
    p.add_argument('--job-size', default='64M',
                   help='area of each of the 4 fio jobs; the working set '
                        'is 4x this (default: %(default)s)')
    p.add_argument('--cache-size', default=None,
                   help='cache size (default: half the working set, like '
                        'the paper: 10 GB cache for 20 GB of data)')
    p.add_argument('--origin-rate', default='80M',
                   help="shared storage bandwidth in bits/s, nbdkit rate "
                        "filter's rate= (default: %(default)s)")
    p.add_argument('--origin-delay-ms', type=float, default=0.0,
                   help='extra latency per shared storage request (nbdkit '
                        'delay filter; default: none)')
    p.add_argument('--seed', type=int, default=None,
                   help='fio random seed of the first phase; phase i uses '
                        'SEED+i (default: a new one each run)')
    p.add_argument('--workdir', default=os.path.join(L.REPO, '.demo'),
                   help='working directory (default: %(default)s)')
    p.add_argument('--no-plot', action='store_true',
                   help='skip the PNG plot')
    p.add_argument('-v', '--verbose', action='store_true',
                   help='print every command as it is run')
    args = p.parse_args(argv)
    args.job_size_b = L.parse_size(args.job_size)
    if args.job_size_b % (1 * L.MiB):
        p.error('--job-size must be a whole number of MiB')
    args.working_set_b = 4 * args.job_size_b
    args.cache_size_b = (L.parse_size(args.cache_size) if args.cache_size
                         else args.working_set_b // 2)
    if args.seconds < 5:
        p.error('--seconds must be at least 5')
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2 ** 31)
    return args


def write_jobfile(path, args):
    lines = [JOB_TEMPLATE.format(size=args.job_size_b)]
    for i in range(4):
        lines.append('[file%d]\nbs=4k\noffset=%d\n'
                     % (i + 1, i * args.job_size_b))
    with open(path, 'w') as f:
        f.write('\n'.join(lines))


class Sampler(threading.Thread):
    """Samples the volume's counters once a second while a phase runs."""

    def __init__(self, client, label, seconds):
        super().__init__(daemon=True)
        self.client = client
        self.label = label
        self.seconds = seconds
        self.samples = []       # (t, show) pairs
        self.error = None
        self._halt = threading.Event()

    def run(self):
        t0 = time.monotonic()
        next_print = 5
        while not self._halt.is_set():
            t = time.monotonic() - t0
            try:
                show = None
                if self.client:
                    show = self.client.show_volume(VOLUME_ID)
            except Exception as exc:   # reported after the phase
                self.error = exc
                return
            self.samples.append((t, show))
            if t >= next_print and t < self.seconds + 1:
                msg = '  [%-8s] %2d/%d s' % (self.label, int(t), self.seconds)
                if show and len(self.samples) > 1:
                    first = self.samples[0][1]
                    h = show['read_hits'] - first['read_hits']
                    m = show['read_misses'] - first['read_misses']
                    if h + m:
                        msg += '  hit ratio so far %.2f' % (h / (h + m))
                    msg += '  cached %d blocks' % show['cached_blocks']
                print(msg, flush=True)
                next_print += 5
            self._halt.wait(1.0)

    def stop(self):
        self._halt.set()
        self.join()


def per_second(log_prefix, seconds):
    """Sum fio's per-job 1 s IOPS logs into [(read, write)] per second.

    fio may add a late partial sample at exit and the jobs do not all log
    the last second, so keep the first sample of each (job, second,
    direction) and only the seconds every job logged.
    """
    d = os.path.dirname(log_prefix)
    base = os.path.basename(log_prefix) + '_iops.'
    jobs = []
    for name in sorted(os.listdir(d)):
        if not name.startswith(base):
            continue
        seen = {}
        with open(os.path.join(d, name)) as f:
            for line in f:
                parts = [x.strip() for x in line.split(',')]
                if len(parts) < 3:
                    continue
                key = (int(round(int(parts[0]) / 1000.0)),
                       1 if parts[2] == '1' else 0)
                seen.setdefault(key, float(parts[1]))
        jobs.append(seen)
    out = []
    for sec in range(1, seconds + 1):
        if not jobs or not all((sec, 0) in j or (sec, 1) in j for j in jobs):
            break
        out.append((sum(j.get((sec, 0), 0.0) for j in jobs),
                    sum(j.get((sec, 1), 0.0) for j in jobs)))
    return out


def hit_series(samples):
    """Per-second block hit ratio from the sampler's cumulative counters."""
    out = []
    for (t0, a), (t1, b) in zip(samples, samples[1:]):
        h = b['read_hits'] - a['read_hits']
        m = b['read_misses'] - a['read_misses']
        out.append((round(t1, 2), h / (h + m) if h + m else None))
    return out


def run_phase(lab, label, uri, args, jobfile, client):
    log_prefix = os.path.join(lab.workdir, 'logs', label)
    os.makedirs(os.path.dirname(log_prefix), exist_ok=True)
    before = client.show_volume(VOLUME_ID) if client else None
    # A new seed for each fio run (as randrepeat=0 intends): the warm phase
    # must not replay the cold phase's offsets.
    seed = args.seed + PHASES.index(label)
    env_line = ('FCACHE_URI=%s FCACHE_RUNTIME=%d FCACHE_SEED=%d FCACHE_LOG=%s'
                % (uri, args.seconds, seed, log_prefix))
    lab.note('fio %s' % label, '%s fio --output-format=json %s'
             % (env_line, jobfile))
    os.environ.update(FCACHE_URI=uri, FCACHE_RUNTIME=str(args.seconds),
                      FCACHE_SEED=str(seed), FCACHE_LOG=log_prefix)
    sampler = Sampler(client, label, args.seconds)
    sampler.start()
    try:
        report = lab.fio('fio %s' % label, [jobfile],
                         timeout=args.seconds + 120, quiet=True)
    finally:
        sampler.stop()
    if sampler.error:
        raise L.LabError('volume-show failed during the %s phase: %s'
                         % (label, sampler.error))
    tot = L.fio_totals(report)
    res = {'phase': label, 'fio_seed': seed, 'read_iops': tot['read_iops'],
           'write_iops': tot['write_iops'], 'mb_per_s': tot['mb_per_s'],
           'runtime_s': tot['runtime_s'],
           'read_lat_us': tot['read_lat_us'],
           'fio_read_bytes': tot['read_bytes'],
           'fio_write_bytes': tot['write_bytes'],
           'per_second': per_second(log_prefix, args.seconds)}
    if client:
        after = client.show_volume(VOLUME_ID)
        h = after['read_hits'] - before['read_hits']
        m = after['read_misses'] - before['read_misses']
        res.update(hit_ratio=h / (h + m) if h + m else 0.0,
                   read_hits=h, read_misses=m,
                   origin_read_bytes=(after['origin_read_bytes'] -
                                      before['origin_read_bytes']),
                   origin_write_bytes=(after['origin_write_bytes'] -
                                       before['origin_write_bytes']),
                   cached_blocks=after['cached_blocks'],
                   hit_per_second=hit_series(sampler.samples))
    else:
        # Without a cache every byte comes from the shared storage.
        res.update(hit_ratio=None, origin_read_bytes=tot['read_bytes'],
                   origin_write_bytes=tot['write_bytes'], cached_blocks=0,
                   hit_per_second=[])
    return res


def print_table(results):
    base = results[0]['read_iops'] + results[0]['write_iops']
    hdr = ('phase', 'read IOPS', 'write IOPS', 'MB/s', 'vs no-cache',
           'hit ratio', 'origin read MB')
    rows = []
    for r in results:
        total = r['read_iops'] + r['write_iops']
        rows.append((r['phase'], '%.0f' % r['read_iops'],
                     '%.0f' % r['write_iops'], '%.1f' % r['mb_per_s'],
                     '%.2fx' % (total / base if base else 0),
                     '-' if r['hit_ratio'] is None
                     else '%.3f' % r['hit_ratio'],
                     '%.1f' % (r['origin_read_bytes'] / 1e6)))
    widths = [max(len(str(x)) for x in col) for col in zip(hdr, *rows)]
    fmt = '  '.join('%%%ds' % w if i else '%%-%ds' % w
                    for i, w in enumerate(widths))
    print(fmt % hdr)
    print('  '.join('-' * w for w in widths))
    for row in rows:
        print(fmt % row)


def plot(results, args, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    colors = {'no-cache': '#9e9e9e', 'cold': '#1f77b4', 'warm': '#2ca02c'}
    fig, (ax1, ax3) = plt.subplots(
        2, 1, figsize=(10, 7.5), gridspec_kw={'height_ratios': [3, 2]})
    ax2 = ax1.twinx()
    offset = 0
    for r in results:
        ps = r['per_second']
        xs = [offset + i + 1 for i in range(len(ps))]
        ax1.plot(xs, [a + b for a, b in ps], color=colors[r['phase']],
                 lw=2, label='%s: IOPS (read+write)' % r['phase'])
        ax1.plot(xs, [a for a, b in ps], color=colors[r['phase']], lw=1,
                 ls=':')
        hp = [(offset + t, h) for t, h in r['hit_per_second'] if h is not None]
        if hp:
            ax2.plot([x for x, _ in hp], [h for _, h in hp],
                     color='#d62728', lw=1.2,
                     label='hit ratio' if r['phase'] == 'cold' else None)
        ax1.axvline(offset, color='k', lw=0.5)
        ax1.text(offset + 0.5, 0, r['phase'], va='bottom', fontsize=9)
        offset += max(len(ps), args.seconds)
    ax1.set_xlabel('seconds (phases back to back; dotted: read IOPS)')
    ax1.set_ylabel('IOPS')
    ax2.set_ylabel('block hit ratio', color='#d62728')
    ax2.set_ylim(0, 1.05)
    ax1.set_ylim(bottom=0)
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, loc='upper left', fontsize=8)
    ax1.set_title('fcache demo: FIO Figure-5 workload over NBD, working set '
                  '%d MiB, cache %d MiB, shared storage %s bit/s'
                  % (args.working_set_b // L.MiB, args.cache_size_b // L.MiB,
                     args.origin_rate), fontsize=10)

    names = [r['phase'] for r in results]
    mbs = [r['mb_per_s'] for r in results]
    bars = ax3.bar(names, mbs, color=[colors[n] for n in names])
    for b, r in zip(bars, results):
        hr = ('no cache' if r['hit_ratio'] is None
              else 'hit ratio %.2f' % r['hit_ratio'])
        ax3.annotate('%.1f MB/s\n%s\norigin read %.0f MB'
                     % (r['mb_per_s'], hr, r['origin_read_bytes'] / 1e6),
                     (b.get_x() + b.get_width() / 2, b.get_height()),
                     ha='center', va='bottom', fontsize=8)
    ax3.set_ylabel('MB/s (read+write)')
    ax3.set_ylim(0, max(mbs) * 1.45 if max(mbs) else 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    args = parse_args(argv)
    work = os.path.abspath(args.workdir)
    # Fresh state every run: a previous cache (or a leftover socket) would
    # make the cold phase warm.
    for name in ('origin', 'agent', 'logs'):
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    for name in ('origin.img', 'origin.sock', 'results.json', 'demo.png'):
        try:
            os.unlink(os.path.join(work, name))
        except FileNotFoundError:
            pass
    os.makedirs(work, exist_ok=True)

    print('fcache demo: working set %d MiB (4 jobs x %d MiB), cache %d MiB, '
          'shared storage limited to %s bit/s%s, %d s per phase, fio seed %d'
          % (args.working_set_b // L.MiB, args.job_size_b // L.MiB,
             args.cache_size_b // L.MiB, args.origin_rate,
             ', +%g ms per request' % args.origin_delay_ms
             if args.origin_delay_ms else '', args.seconds, args.seed),
          flush=True)
    results = []
    with L.Lab(work, verbose=args.verbose) as lab:
        origin = os.path.join(work, 'origin.img')
        origin_size = max(2 * L.GiB, 2 * args.working_set_b)
        with open(origin, 'wb') as f:
            f.truncate(origin_size)
        print('preparing: %d MiB of data on a %d MiB sparse shared-storage '
              'image' % (args.working_set_b // L.MiB, origin_size // L.MiB),
              flush=True)
        L.fill(lab, origin, 0, args.working_set_b)

        filters, params = ['rate'], ['rate=%s' % args.origin_rate]
        if args.origin_delay_ms:
            filters.append('delay')
            params += ['delay-read=%gms' % args.origin_delay_ms,
                       'delay-write=%gms' % args.origin_delay_ms]
        _, origin_uri = lab.nbdkit('origin', ['file', origin] + params,
                                   filters=filters)
        agent = lab.agent('agent', args.cache_size_b, **L.FIO_AGENT_KEYS)
        jobfile = os.path.join(work, 'workload.fio')
        write_jobfile(jobfile, args)

        for label in PHASES:
            client = None
            uri = origin_uri
            if label == 'cold':
                try:
                    att = agent.client.attach_volume(
                        VOLUME_ID, origin_uri, cache_size=args.cache_size_b,
                        write_policy='read_only', admission='all')
                except Exception as exc:
                    raise lab.agent_error(agent,
                                          'volume-attach failed: %s' % exc)
                lab.note('attach', "fcache --socket %s volume-attach %s "
                         "--origin '%s' --cache-size %d --write-policy "
                         "read_only" % (agent.conf['control_socket'],
                                        VOLUME_ID, origin_uri,
                                        args.cache_size_b))
            if label in ('cold', 'warm'):
                client = agent.client
                uri = att['export_uri']
            print('phase %-8s fio -> %s' % (label, uri), flush=True)
            try:
                results.append(run_phase(lab, label, uri, args, jobfile,
                                         client))
            except L.LabError as exc:
                if agent.proc.alive() and label == 'no-cache':
                    raise
                raise lab.agent_error(agent, str(exc))
            if not agent.proc.alive():
                raise lab.agent_error(agent, 'the agent exited (status %s)'
                                      % agent.proc.popen.returncode)
        status = agent.client.status()
        agent.client.detach_volume(VOLUME_ID)
        rc = lab.stop(agent.proc)
        if rc:
            raise L.LabError('the agent exited with status %s at SIGTERM; '
                             'see %s:\n%s' % (rc, agent.proc.log,
                                              L.tail(agent.proc.log)))
        commands = lab.commands

    print()
    print_table(results)
    cold, warm, none = results[1], results[2], results[0]
    t = lambda r: r['read_iops'] + r['write_iops']  # noqa: E731
    print()
    print('warm cache: %.2fx the IOPS of no cache, %.0f%% of block reads hit, '
          'shared storage read %.0f MB instead of %.0f MB.'
          % (t(warm) / t(none) if t(none) else 0, 100 * warm['hit_ratio'],
             warm['origin_read_bytes'] / 1e6, none['origin_read_bytes'] / 1e6))

    out = {
        'date': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
        'command': L.invocation('tools/run-demo.sh', argv),
        'machine': L.machine(),
        'agent_build': L.agent_build(),
        'config': {'seconds': args.seconds, 'job_size_bytes': args.job_size_b,
                   'working_set_bytes': args.working_set_b,
                   'cache_size_bytes': args.cache_size_b,
                   'origin_rate_bits': args.origin_rate,
                   'origin_delay_ms': args.origin_delay_ms,
                   'fio_first_seed': args.seed, 'write_policy': 'read_only',
                   'block_size': status.get('block_size')},
        'phases': results,
        'commands': commands,
    }
    res_path = os.path.join(work, 'results.json')
    with open(res_path, 'w') as f:
        json.dump(out, f, indent=1)
    print('results: %s' % res_path)
    if not args.no_plot:
        png = os.path.join(work, 'demo.png')
        plot(results, args, png)
        print('plot:    %s' % png)
    print('fio job: %s (seeds %d..%d; rerun with --seed %d)'
          % (jobfile, args.seed, args.seed + len(PHASES) - 1, args.seed))
    if warm['hit_ratio'] <= cold['hit_ratio']:
        print('note: the warm phase did not hit more than the cold one; '
              'is the cache (%d MiB) too small for the hot zones?'
              % (args.cache_size_b // L.MiB))
    return 0


if __name__ == '__main__':
    sys.exit(L.run_main(main, sys.argv[1:], 'demo'))
