#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Live storage migration between media: five schemes against QEMU (issue 18).

A volume's origin moves from A to B while a workload runs on it, in four
directions (hdd->ssd, ssd->hdd, hdd->hdd, ssd->ssd).  The media are
emulated by nbdkit serving a file on tmpfs through filters:

  HDD-like  --filter=noparallel (one request at a time, like one head)
            --filter=delay rdelay=wdelay=--hdd-delay-ms (seek + rotation)
            --filter=rate rate=--hdd-mbps (streaming bandwidth)
  SSD-like  --filter=delay rdelay=wdelay=--ssd-delay-ms, requests in
            parallel, --filter=rate rate=--ssd-mbps

and every origin also goes through --filter=log, whose log gives the
bytes written to it (the wear of an SSD-like origin).

Systems measured on the same origins, workload and machine, in the same
run (the order of the systems rotates from one repetition to the next):

  dbt, mirror, lr, slr, aio   fcache-agent's ``volume-move`` on a ucache
                              volume (write_through, 2 MiB cache) whose
                              NBD export the workload drives
  qemu-bg, qemu-wb            qemu-storage-daemon exporting A over NBD
                              (the workload drives that export) while
                              ``blockdev-mirror`` (copy-mode background,
                              write-blocking) copies A to B; the job is
                              completed (pivot to B) once it is ready

The workload (a libnbd client, --threads threads) issues 4 KiB random
reads and writes (--read-share reads) over the whole volume, paced at
--rate-iops in total; a request that falls behind its slot is not made up
later, so the throughput is min(rate, what the storage gives).  It runs
from the start of the move to its end.

Figures (the metric of nova_ext/movecost.py, §4 of the paper):

  lambda_io    1 - throughput during the move / throughput of the same
               workload with no move, on the faster of A and B (the same
               system, same run)
  lambda_time  move time / time of ``qemu-img convert`` of the idle image
               from A to B (same media, same run)
  lambda_wear  (bytes written to SSD-like origins, less one copy of the
               image on an SSD-like B) / bytes the workload wrote; 0 when
               neither side is an SSD
  MC           lambda_time * (g*lambda_wear + (1-g)*lambda_io), g = 0, .5, 1
  downtime     fcache: the agent's downtime_ms (requests held for the
               switch); QEMU: block-job-complete to BLOCK_JOB_COMPLETED
               (the final drain and pivot).  The longest request the
               workload saw during the move is reported for both.
  redundant    bytes written to A and B beyond one write per workload
               write and one copy of the image (never below 0)

``auto`` is nova_ext.movecost.choose_scheme with the emulated media's
bandwidths and the workload's rates; the goal is that its scheme's
measured MC is below both QEMU modes' for every direction and g.

Run with bench/run-storage-move.sh (it builds what is needed first).
--quick: one run per cell; otherwise medians of --runs (3).  Results go to
results/storage-move-<time>.json and a figure to
results/storage-move-<time>.png.
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import socket
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nbd  # noqa: E402  (python3-libnbd)

from nova_ext import movecost  # noqa: E402
from tools.fcdemo import lab as fclab  # noqa: E402

MiB = 1024 * 1024
DIRECTIONS = (('hdd', 'ssd'), ('ssd', 'hdd'), ('hdd', 'hdd'),
              ('ssd', 'ssd'))
FC_SCHEMES = movecost.SCHEMES
QEMU_MODES = {'qemu-bg': 'background', 'qemu-wb': 'write-blocking'}
SYSTEMS = FC_SCHEMES + tuple(QEMU_MODES)
GAMMAS = (0.0, 0.5, 1.0)
# The paper's figure for each direction, and its tables' row order.
FIGURE = {'hdd->ssd': 11, 'ssd->hdd': 12, 'ssd->ssd': 13, 'hdd->hdd': 14}
TABLE_ORDER = ('ssd->ssd', 'hdd->ssd', 'ssd->hdd', 'hdd->hdd')
TERMINAL = ('done', 'failed', 'aborted')
CACHE_BYTES = 2 * MiB
BS = 4096


def dname(d):
    return '%s->%s' % d


# -- the media --------------------------------------------------------------

class Media(object):
    def __init__(self, args):
        self.args = args

    def filters(self, medium, logfile):
        a = self.args
        if medium == 'hdd':
            return (['log', 'noparallel', 'delay', 'rate'],
                    ['logfile=%s' % logfile,
                     'rdelay=%gms' % a.hdd_delay_ms,
                     'wdelay=%gms' % a.hdd_delay_ms,
                     'rate=%dM' % (a.hdd_mbps * 8), 'burstiness=0.02'])
        return (['log', 'delay', 'rate'],
                ['logfile=%s' % logfile,
                 'rdelay=%gms' % a.ssd_delay_ms,
                 'wdelay=%gms' % a.ssd_delay_ms,
                 'rate=%dM' % (a.ssd_mbps * 8), 'burstiness=0.02'])

    def bandwidth_bps(self):
        return {'hdd': self.args.hdd_mbps * 1e6,
                'ssd': self.args.ssd_mbps * 1e6}


class Origin(object):
    """One emulated disk: an nbdkit over a file on tmpfs."""

    def __init__(self, lab, media, imgdir, name, medium, template=None):
        self.lab = lab
        self.medium = medium
        self.path = os.path.join(imgdir, '%s.img' % name)
        if template:
            shutil.copyfile(template, self.path)
        else:
            with open(self.path, 'wb') as f:
                f.truncate(os.path.getsize(media.template))
        self.logfile = os.path.join(imgdir, '%s.nbdlog' % name)
        filters, fargs = media.filters(medium, self.logfile)
        self.proc, self.uri = lab.nbdkit(
            name, ['file', self.path] + fargs, filters=filters)

    def close(self):
        """Stop the server; return the bytes written to it (log filter)."""
        if self.proc is not None:
            self.lab.stop(self.proc)
            self.proc = None
        written = 0
        pat = re.compile(r' (?:Write|Zero) id=\d+ offset=0x[0-9a-f]+ '
                         r'count=0x([0-9a-f]+)')
        with open(self.logfile) as f:
            for line in f:
                m = pat.search(line)
                if m:
                    written += int(m.group(1), 16)
        for p in (self.path, self.logfile):
            try:
                os.unlink(p)
            except OSError:
                pass
        return written


# -- the workload -----------------------------------------------------------

class Workload(object):
    """Paced 4 KiB random reads and writes over NBD, one handle a thread."""

    def __init__(self, uri, size, rate_iops, threads, read_share, seed):
        self.size = size
        self.interval = threads / float(rate_iops)
        self.read_share = read_share
        self.stop_flag = threading.Event()
        self.handles = []
        for _ in range(threads):
            h = nbd.NBD()
            h.connect_uri(uri)
            self.handles.append(h)
        self.records = [[] for _ in range(threads)]
        self.errors = []
        self.seed = seed
        self.threads = []
        rnd = random.Random(seed)
        self.bufs = [bytes(rnd.getrandbits(8) for _ in range(BS))
                     for _ in range(4)]

    def _run(self, i):
        h = self.handles[i]
        rec = self.records[i]
        rnd = random.Random(self.seed * 100 + i)
        blocks = self.size // BS
        nxt = time.monotonic() + rnd.random() * self.interval
        try:
            while not self.stop_flag.is_set():
                now = time.monotonic()
                if nxt > now:
                    time.sleep(nxt - now)
                nxt += self.interval
                off = rnd.randrange(blocks) * BS
                write = rnd.random() >= self.read_share
                t = time.monotonic()
                if write:
                    h.pwrite(self.bufs[len(rec) % 4], off)
                else:
                    h.pread(BS, off)
                end = time.monotonic()
                rec.append((end, write, end - t))
                if nxt < end:
                    nxt = end       # a late slot is not made up
        except Exception as exc:   # reported by stop()
            self.errors.append(repr(exc))

    def start(self):
        for i in range(len(self.handles)):
            t = threading.Thread(target=self._run, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(60)
        for h in self.handles:
            try:
                h.shutdown()
            except Exception:
                pass

    def summary(self, t0, t1):
        recs = [r for rs in self.records for r in rs]
        inside = [r for r in recs if t0 <= r[0] <= t1]
        span = max(t1 - t0, 1e-6)
        writes = sum(1 for r in recs if r[1])
        return {'ops': len(inside), 'seconds': span,
                'bytes_per_s': len(inside) * BS / span,
                'max_latency_ms': max([r[2] for r in inside] or [0]) * 1e3,
                'mean_latency_ms': (statistics.mean(r[2] for r in inside)
                                    * 1e3 if inside else 0.0),
                'write_bytes_total': writes * BS,
                'ops_total': len(recs), 'errors': list(self.errors)}


# -- QMP --------------------------------------------------------------------

class QMP(object):
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(path)
        self.f = self.sock.makefile('rwb')
        self.events = []
        # An event may come ahead of the greeting (see
        # tests/functional/test_qemu_migration.py's Qmp): keep it.
        while True:
            greeting = self._read()
            if 'event' not in greeting:
                break
            self.events.append(greeting)
        if 'QMP' not in greeting:
            raise fclab.LabError('not a QMP greeting: %r' % greeting)
        self.cmd('qmp_capabilities')

    def _read(self):
        line = self.f.readline()
        if not line:
            raise fclab.LabError('qemu-storage-daemon closed QMP')
        return json.loads(line)

    def cmd(self, name, **args):
        msg = {'execute': name}
        if args:
            msg['arguments'] = dict((k.replace('_', '-'), v)
                                    for k, v in args.items())
        self.f.write(json.dumps(msg).encode() + b'\n')
        self.f.flush()
        while True:
            r = self._read()
            if 'event' in r:
                self.events.append(r)
                continue
            if 'error' in r:
                raise fclab.LabError('QMP %s: %s' % (name, r['error']))
            return r.get('return')

    def wait_event(self, names, timeout=300):
        deadline = time.monotonic() + timeout
        try:
            while True:
                for i, e in enumerate(self.events):
                    if e['event'] in names:
                        return self.events.pop(i)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                self.sock.settimeout(left)
                self.events.append(self._read())
        except socket.timeout:
            raise fclab.LabError('no QMP event %s within %g s'
                                 % ('/'.join(names), timeout))
        finally:
            self.sock.settimeout(120)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class QSD(object):
    """qemu-storage-daemon exporting origin A; optionally B as a target."""

    def __init__(self, lab, name, a_uri_sock, b_sock=None):
        self.lab = lab
        d = os.path.join(lab.workdir, name)
        os.makedirs(d, exist_ok=True)
        self.qmp_path = os.path.join(d, 'qmp.sock')
        self.nbd_path = os.path.join(d, 'nbd.sock')
        argv = ['qemu-storage-daemon',
                '--chardev', 'socket,id=qmp0,path=%s,server=on,wait=off'
                % self.qmp_path,
                '--monitor', 'chardev=qmp0',
                '--blockdev', 'driver=nbd,node-name=src,server.type=unix,'
                'server.path=%s' % a_uri_sock]
        if b_sock:
            argv += ['--blockdev', 'driver=nbd,node-name=dst,'
                     'server.type=unix,server.path=%s' % b_sock]
        argv += ['--nbd-server', 'addr.type=unix,addr.path=%s'
                 % self.nbd_path,
                 '--export', 'type=nbd,id=exp0,node-name=src,name=vol,'
                 'writable=on']
        self.proc = lab.start(name, argv)
        lab.wait_socket(self.proc, self.nbd_path)
        lab.wait_socket(self.proc, self.qmp_path)
        self.qmp = QMP(self.qmp_path)
        self.uri = 'nbd+unix:///vol?socket=%s' % self.nbd_path

    def close(self):
        try:
            self.qmp.cmd('quit')
        except Exception:
            pass
        self.qmp.close()
        self.lab.stop(self.proc)


def sock_of(uri):
    return uri.split('socket=', 1)[1]


# -- one cell ---------------------------------------------------------------

class Bench(object):
    def __init__(self, args, lab, imgdir, agent):
        self.args = args
        self.lab = lab
        self.imgdir = imgdir
        self.agent = agent
        self.media = Media(args)
        self.media.template = os.path.join(imgdir, 'template.img')
        with open(self.media.template, 'wb') as f:
            for _ in range(args.size // MiB):
                f.write(os.urandom(MiB))
        self.n = 0

    def _name(self, what):
        self.n += 1
        return '%s-%d' % (what, self.n)

    def origins(self, src, dst):
        n = self._name('o')
        a = Origin(self.lab, self.media, self.imgdir, n + 'A', src,
                   template=self.media.template)
        b = None
        if dst:
            b = Origin(self.lab, self.media, self.imgdir, n + 'B', dst)
        return a, b

    def workload(self, uri, seed):
        a = self.args
        return Workload(uri, a.size, a.rate_iops, a.threads, a.read_share,
                        seed)

    def plain_copy(self, src, dst):
        a, b = self.origins(src, dst)
        try:
            t = time.monotonic()
            self.lab.run('plain copy', ['qemu-img', 'convert', '-n', '-f',
                                        'raw', '-O', 'raw', a.uri, b.uri],
                         quiet=True)
            return time.monotonic() - t
        finally:
            a.close()
            b.close()

    def baseline(self, system, medium, seed):
        """Workload throughput with no move, on one medium."""
        a, _ = self.origins(medium, None)
        qsd = None
        vid = None
        try:
            if system == 'fcache':
                vid = self._name('base')
                uri = self.agent.client.attach_volume(
                    vid, a.uri, cache_size=CACHE_BYTES,
                    write_policy='write_through')['export_uri']
            else:
                qsd = QSD(self.lab, self._name('qsd'), sock_of(a.uri))
                uri = qsd.uri
            wl = self.workload(uri, seed)
            t0 = time.monotonic()
            wl.start()
            time.sleep(self.args.baseline_s)
            t1 = time.monotonic()
            wl.stop()
            summ = wl.summary(t0, t1)
            if summ['errors']:
                raise fclab.LabError('no-move workload on %s (%s) failed: %s'
                                     % (medium, system, summ['errors'][0]))
            return summ['bytes_per_s']
        finally:
            if vid:
                self.agent.client.detach_volume(vid)
            if qsd:
                qsd.close()
            a.close()

    def move(self, system, src, dst, seed):
        a, b = self.origins(src, dst)
        out = {'system': system}
        try:
            if system in QEMU_MODES:
                out.update(self._move_qemu(system, a, b, seed))
            else:
                out.update(self._move_fcache(system, a, b, seed))
        finally:
            a_w = a.close()
            b_w = b.close()
        out['a_write_bytes'] = a_w
        out['b_write_bytes'] = b_w
        return out

    def _move_fcache(self, scheme, a, b, seed):
        c = self.agent.client
        vid = self._name('mv')
        uri = c.attach_volume(vid, a.uri, cache_size=CACHE_BYTES,
                              write_policy='write_through')['export_uri']
        wl = None
        try:
            wl = self.workload(uri, seed)
            wl.start()
            t0 = time.monotonic()
            extra = {}
            if self.args.rate_limit_mbps:
                extra['rate_limit_mbps'] = self.args.rate_limit_mbps
            c.move_volume(vid, b.uri, scheme=scheme, **extra)
            # The agent starts its clock during that call: counting from
            # its return can only make the move look longer.
            t_started = time.monotonic()
            deadline = t0 + self.args.timeout_s
            while True:
                st = c.move_status(vid)
                if st['state'] in TERMINAL:
                    break
                if time.monotonic() > deadline:
                    c.abort_move(vid)
                    st = c.move_status(vid)
                    st['error'] = 'timed out (aborted)'
                    break
                time.sleep(0.02)
            t1 = time.monotonic()
            if st['state'] == 'done':
                # The move ended when the agent let requests go to B, not
                # when this loop looked (up to 20 ms and a status call
                # later, time the VM already spent on B and that QEMU's
                # peer, whose end is an event, is not charged for).
                t1 = min(t1, t_started + st['elapsed_s'])
        finally:
            if wl:
                wl.stop()
            c.detach_volume(vid)
        errors = wl.summary(t0, t1)['errors']
        return {'ok': st['state'] == 'done' and not errors,
                'error': st.get('error') or (errors and errors[0]),
                'move_s': t1 - t0, 'downtime_ms': st.get('downtime_ms'),
                'agent_status': st, 'workload': wl.summary(t0, t1)}

    def _move_qemu(self, system, a, b, seed):
        qsd = QSD(self.lab, self._name('qsd'), sock_of(a.uri),
                  sock_of(b.uri))
        ok, err, downtime = True, None, None
        wl = None
        try:
            wl = self.workload(qsd.uri, seed)
            wl.start()
            t0 = time.monotonic()
            try:
                extra = {}
                if self.args.qemu_granularity:
                    extra['granularity'] = self.args.qemu_granularity
                qsd.qmp.cmd('blockdev-mirror', job_id='mv', device='src',
                            target='dst', sync='full',
                            copy_mode=QEMU_MODES[system], **extra)
                ev = qsd.qmp.wait_event(('BLOCK_JOB_READY',
                                         'BLOCK_JOB_COMPLETED'),
                                        self.args.timeout_s)
                if ev['event'] == 'BLOCK_JOB_READY':
                    tc = time.monotonic()
                    qsd.qmp.cmd('block-job-complete', device='mv')
                    ev = qsd.qmp.wait_event(('BLOCK_JOB_COMPLETED',),
                                            self.args.timeout_s)
                    downtime = (time.monotonic() - tc) * 1e3
                if ev['data'].get('error'):
                    ok, err = False, ev['data']['error']
            except fclab.LabError as exc:
                # Background mode may never become ready (the workload
                # dirties faster than the job copies): a failed move,
                # like DBT's non-convergence.
                ok, err = False, str(exc)
                try:
                    qsd.qmp.cmd('block-job-cancel', device='mv', force=True)
                except Exception:   # the QMP stream may be cut mid-line
                    pass
            t1 = time.monotonic()
        finally:
            if wl:
                wl.stop()
            qsd.close()
        errors = wl.summary(t0, t1)['errors']
        if errors and ok:
            ok, err = False, errors[0]
        return {'ok': ok, 'error': err, 'move_s': t1 - t0,
                'downtime_ms': downtime, 'workload': wl.summary(t0, t1)}


# -- figures ----------------------------------------------------------------

def cell_metrics(cell, plain_s, best_bps, src, dst, size):
    wl = cell['workload']
    vm_w = wl['write_bytes_total']
    ssd_w = 0.0
    if src == 'ssd':
        ssd_w += cell['a_write_bytes']
    if dst == 'ssd':
        ssd_w += max(0.0, cell['b_write_bytes'] - size)
    lam_wear = ssd_w / vm_w if vm_w else 0.0
    lam_time = cell['move_s'] / plain_s if cell['ok'] else math.inf
    lam_io = max(0.0, 1 - wl['bytes_per_s'] / best_bps) if cell['ok'] \
        else 1.0
    m = {'lambda_time': lam_time, 'lambda_io': lam_io,
         'lambda_wear': lam_wear,
         'redundant_bytes': max(0, cell['a_write_bytes'] +
                                cell['b_write_bytes'] - vm_w - size),
         'downtime_ms': cell['downtime_ms'],
         'max_latency_ms': wl['max_latency_ms'],
         'move_s': cell['move_s'], 'ok': cell['ok']}
    for g in GAMMAS:
        m['mc_%g' % g] = movecost.migration_cost(lam_time, lam_io,
                                                 lam_wear, g)
    return m


def median(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return statistics.median(xs)


def aggregate(runs, size):
    """Per direction and system: the median of each figure over the runs."""
    agg = {}
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        fast = 'ssd' if 'ssd' in (src, dst) else 'hdd'
        agg[d] = {}
        for system in SYSTEMS:
            per = []
            for run in runs:
                fam = 'qemu' if system in QEMU_MODES else 'fcache'
                per.append(cell_metrics(
                    run['moves'][d][system], run['plain_copy_s'][d],
                    run['baseline_bps'][fam][fast], src, dst, size))
            agg[d][system] = dict(
                (k, median([p[k] for p in per])) for k in per[0]
                if k != 'ok')
            agg[d][system]['failed_runs'] = sum(1 for p in per
                                                if not p['ok'])
    return agg


def choose_auto(args, media):
    wl = movecost.Workload(
        args.size, args.rate_iops * (1 - args.read_share) * BS,
        args.rate_iops * args.read_share * BS,
        bandwidth_bps=media.bandwidth_bps())
    picks = {}
    for src, dst in DIRECTIONS:
        for g in GAMMAS:
            scheme, _ = movecost.choose_scheme(src, dst, wl, g)
            picks['%s@%g' % (dname((src, dst)), g)] = scheme
    return picks


def verdicts(agg, picks):
    v = {}
    lr_least = {}
    for d in ('hdd->ssd', 'ssd->hdd', 'ssd->ssd'):
        w = dict((s, agg[d][s]['lambda_wear']) for s in FC_SCHEMES)
        lr_least[d] = {'lr': w['lr'], 'min_other': min(
            w[s] for s in FC_SCHEMES if s != 'lr'),
            'holds': w['lr'] <= min(w.values()) + 1e-9}
    v['lr_least_wear'] = lr_least
    io = dict((s, agg['ssd->hdd'][s]['lambda_io']) for s in FC_SCHEMES)
    v['aio_best_io_source_faster'] = {
        'lambda_io': io, 'best': min(io, key=io.get),
        'holds': io['aio'] <= min(io.values()) + 1e-9}
    dt = {}
    for d in ('ssd->hdd', 'hdd->hdd'):
        x = dict((s, agg[d][s]['downtime_ms'] or 0.0) for s in FC_SCHEMES)
        dt[d] = {'downtime_ms': x, 'worst': max(x, key=x.get),
                 'holds': x['dbt'] >= max(x.values()) - 1e-9}
    dt['dbt ssd->hdd vs ssd->ssd'] = {
        'holds': (agg['ssd->hdd']['dbt']['downtime_ms'] or 0) >
        (agg['ssd->ssd']['dbt']['downtime_ms'] or 0)}
    v['dbt_worst_downtime_to_slower'] = dt
    goal = {}
    for key, scheme in picks.items():
        d, g = key.split('@')
        mc = agg[d][scheme]['mc_%s' % g]
        q = [agg[d][m]['mc_%s' % g] for m in QEMU_MODES]
        goal[key] = {'auto': scheme, 'mc': mc, 'qemu_bg': q[0],
                     'qemu_wb': q[1],
                     'holds': mc is not None and all(
                         x is not None and mc < x for x in q),
                     'not_above': mc is not None and all(
                         x is not None and mc <= x for x in q)}
    v['auto_below_qemu'] = goal
    return v


def fmt(x, p=2):
    if x is None:
        return '-'
    if isinstance(x, float) and math.isinf(x):
        return 'inf'
    return '%.*f' % (p, x)


def report(res):
    agg = res['median']
    cols = SYSTEMS
    w = 9
    head = '%-10s' % '' + ''.join('%*s' % (w, c) for c in cols)
    print('\nTable 5 (downtime, ms; QEMU: block-job-complete to completed)')
    print(head)
    for d in TABLE_ORDER:
        print('%-10s' % d + ''.join(
            '%*s' % (w, fmt(agg[d][s]['downtime_ms'], 0)) for s in cols))
    print('\nlongest workload request during the move, ms')
    print(head)
    for d in TABLE_ORDER:
        print('%-10s' % d + ''.join(
            '%*s' % (w, fmt(agg[d][s]['max_latency_ms'], 0)) for s in cols))
    print('\nTable 6 (lambda_wear: SSD writes per workload write; '
          'expected with alpha = beta = 0.5)')
    print(head)
    for d in TABLE_ORDER:
        src, dst = d.split('->')
        print('%-10s' % d + ''.join(
            '%*s' % (w, fmt(agg[d][s]['lambda_wear'])) for s in cols))
        print('%-10s' % '  expected' + ''.join(
            '%*s' % (w, fmt(movecost.expected_wear(s, src, dst)))
            for s in FC_SCHEMES))
    for d in sorted(FIGURE, key=FIGURE.get):
        print('\nFigure %d: %s  (failed runs in brackets)' % (FIGURE[d], d))
        print('%-9s %7s %7s %7s %9s %7s %7s %7s %7s' % (
            'system', 'l_time', 'l_io', 'l_wear', 'redund.M', 'MC g=0',
            'g=.5', 'g=1', 'move s'))
        for s in cols:
            m = agg[d][s]
            print('%-9s %7s %7s %7s %9s %7s %7s %7s %7s%s' % (
                s, fmt(m['lambda_time']), fmt(m['lambda_io']),
                fmt(m['lambda_wear']), fmt(m['redundant_bytes'] / MiB, 1),
                fmt(m['mc_0']), fmt(m['mc_0.5']), fmt(m['mc_1']),
                fmt(m['move_s']),
                ' [%d failed]' % m['failed_runs'] if m['failed_runs']
                else ''))
    print('\nauto (movecost.choose_scheme) against QEMU, measured MC')
    for key, g in sorted(res['verdicts']['auto_below_qemu'].items()):
        print('  %-14s auto=%-6s MC %6s  qemu-bg %6s  qemu-wb %6s  %s' % (
            key, g['auto'], fmt(g['mc'], 3), fmt(g['qemu_bg'], 3),
            fmt(g['qemu_wb'], 3), 'lower' if g['holds'] else
            'tie' if g['not_above'] else 'NOT lower'))
    v = res['verdicts']
    print('\nverdicts against the paper')
    for d, x in sorted(v['lr_least_wear'].items()):
        print('  LR least wear %-9s %s (lr %.2f, best other %.2f)' % (
            d, 'holds' if x['holds'] else 'does NOT hold', x['lr'],
            x['min_other']))
    x = v['aio_best_io_source_faster']
    print('  AIO best IO ssd->hdd: %s (best %s)' % (
        'holds' if x['holds'] else 'does NOT hold', x['best']))
    for d, x in sorted(v['dbt_worst_downtime_to_slower'].items()):
        print('  DBT worst downtime %-24s %s%s' % (
            d, 'holds' if x['holds'] else 'does NOT hold',
            ' (worst %s)' % x['worst'] if 'worst' in x else ''))


def _rst_table(header, rows):
    cols = list(zip(*([header] + rows)))
    widths = [max(len(str(x)) for x in c) for c in cols]
    rule = ' '.join('=' * w for w in widths)
    out = [rule, ' '.join(str(h).ljust(w) for h, w in zip(header, widths)),
           rule]
    for r in rows:
        out.append(' '.join(str(x).ljust(w) for x, w in zip(r, widths)))
    out.append(rule)
    return '\n'.join(out) + '\n'


def rst(res):
    """The tables of report() as reStructuredText, for the doc."""
    agg = res['median']
    cols = list(SYSTEMS)
    parts = ['Table 5: downtime (ms)\n', _rst_table(
        ['direction'] + cols,
        [[d] + [fmt(agg[d][s]['downtime_ms'], 0) for s in cols]
         for d in TABLE_ORDER])]
    parts += ['\nLongest workload request during the move (ms)\n',
              _rst_table(['direction'] + cols,
                         [[d] + [fmt(agg[d][s]['max_latency_ms'], 0)
                                 for s in cols] for d in TABLE_ORDER])]
    rows = []
    for d in TABLE_ORDER:
        src, dst = d.split('->')
        rows.append([d] + [fmt(agg[d][s]['lambda_wear']) for s in cols])
        rows.append(['(expected)'] + [
            fmt(movecost.expected_wear(s, src, dst)) for s in FC_SCHEMES]
            + ['', ''])
    parts += ['\nTable 6: lambda_wear, measured and expected '
              '(alpha = beta = 0.5)\n',
              _rst_table(['direction'] + cols, rows)]
    for d in sorted(FIGURE, key=FIGURE.get):
        rows = []
        for s in cols:
            m = agg[d][s]
            rows.append([s, fmt(m['lambda_time']), fmt(m['lambda_io']),
                         fmt(m['lambda_wear']),
                         fmt(m['redundant_bytes'] / MiB, 1),
                         fmt(m['mc_0'], 3), fmt(m['mc_0.5'], 3),
                         fmt(m['mc_1'], 3), fmt(m['move_s']),
                         str(m['failed_runs'])])
        parts += ['\nFigure %d: %s\n' % (FIGURE[d], d), _rst_table(
            ['system', 'l_time', 'l_io', 'l_wear', 'redundant MiB',
             'MC g=0', 'MC g=0.5', 'MC g=1', 'move s', 'failed'], rows)]
    rows = []
    for key, g in sorted(res['verdicts']['auto_below_qemu'].items()):
        rows.append([key, g['auto'], fmt(g['mc'], 3), fmt(g['qemu_bg'], 3),
                     fmt(g['qemu_wb'], 3), 'yes' if g['holds'] else
                     'tie' if g['not_above'] else 'NO'])
    parts += ['\nauto against QEMU (measured MC)\n', _rst_table(
        ['direction@g', 'auto', 'MC', 'qemu-bg', 'qemu-wb', 'lower'],
        rows)]
    return '\n'.join(parts)


def figure(res, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    agg = res['median']
    fig, axes = plt.subplots(4, 3, figsize=(13, 13))
    for i, d in enumerate(sorted(FIGURE, key=FIGURE.get)):
        ax_t, ax_io, ax_mc = axes[i]
        vals_t = [agg[d][s]['lambda_time'] for s in SYSTEMS]
        vals_t = [v if v is not None and not math.isinf(v) else 0
                  for v in vals_t]
        ax_t.bar(SYSTEMS, vals_t, color='tab:blue')
        for j, s in enumerate(SYSTEMS):
            if agg[d][s]['failed_runs']:
                ax_t.text(j, 0.02, 'failed', rotation=90, ha='center',
                          va='bottom', color='tab:red')
        ax_t.set_title('Fig. %d(a) %s: lambda_time' % (FIGURE[d], d))
        ax_io.bar(SYSTEMS, [agg[d][s]['lambda_io'] for s in SYSTEMS],
                  color='tab:orange')
        ax_io.set_title('(b) %s: lambda_IO' % d)
        gs = [x / 10.0 for x in range(11)]
        for s in SYSTEMS:
            m = agg[d][s]
            ys = [movecost.migration_cost(
                m['lambda_time'], m['lambda_io'], m['lambda_wear'], g)
                for g in gs]
            ax_mc.plot(gs, ys, marker='o' if s in QEMU_MODES else '.',
                       linestyle='--' if s in QEMU_MODES else '-',
                       label=s)
        ax_mc.set_title('(c) %s: MC vs gamma' % d)
        ax_mc.set_xlabel('gamma')
        for ax in (ax_t, ax_io):
            ax.tick_params(axis='x', labelrotation=45)
        if i == 0:
            ax_mc.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


# -- main -------------------------------------------------------------------

def one_run(bench, rep, args):
    run = {'plain_copy_s': {}, 'baseline_bps': {'fcache': {}, 'qemu': {}},
           'moves': {}}
    for src, dst in DIRECTIONS:
        run['plain_copy_s'][dname((src, dst))] = bench.plain_copy(src, dst)
    for fam in ('fcache', 'qemu'):
        for medium in ('hdd', 'ssd'):
            run['baseline_bps'][fam][medium] = bench.baseline(
                fam, medium, 1000 + rep)
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        run['moves'][d] = {}
        k = rep % len(SYSTEMS)
        for system in SYSTEMS[k:] + SYSTEMS[:k]:
            cell = bench.move(system, src, dst, 2000 + rep)
            run['moves'][d][system] = cell
            print('  run %d %-9s %-8s %s %.2f s downtime %s ms, %.0f '
                  'KB/s' % (rep + 1, d, system,
                            'done' if cell['ok'] else 'FAILED',
                            cell['move_s'], fmt(cell['downtime_ms'], 1),
                            cell['workload']['bytes_per_s'] / 1e3),
                  flush=True)
    print('  run %d: plain copy %s s; no-move KB/s %s' % (
        rep + 1, dict((k, round(v, 2)) for k, v in
                      run['plain_copy_s'].items()),
        dict((f, dict((m, round(v / 1e3)) for m, v in x.items()))
             for f, x in run['baseline_bps'].items())), flush=True)
    return run


def finish(res, out):
    with open(out, 'w') as f:
        json.dump(res, f, indent=1, default=str)
    png = os.path.splitext(out)[0] + '.png'
    figure(res, png)
    with open(os.path.splitext(out)[0] + '.rst.txt', 'w') as f:
        f.write(rst(res))
    print('\nresults: %s\nfigure: %s' % (out, png))


def rereport(path):
    with open(path) as f:
        res = json.load(f)
    p = argparse.Namespace(**res['params'])
    res['median'] = aggregate(res['runs'], p.size)
    res['auto'] = choose_auto(p, Media(p))
    res['verdicts'] = verdicts(res['median'], res['auto'])
    report(res)
    finish(res, path)
    return 0


def build_parser():
    """The benchmark's options: media, workload and run (the probe's too)."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--quick', action='store_true',
                    help='one run per cell')
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--size', default='64M', help='image size (64M)')
    ap.add_argument('--hdd-mbps', type=int, default=50)
    ap.add_argument('--hdd-delay-ms', type=float, default=2.0)
    ap.add_argument('--ssd-mbps', type=int, default=200)
    ap.add_argument('--ssd-delay-ms', type=float, default=0.1)
    ap.add_argument('--rate-iops', type=float, default=800)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--read-share', type=float, default=0.5)
    ap.add_argument('--baseline-s', type=float, default=3.0)
    ap.add_argument('--timeout-s', type=float, default=20.0,
                    help='a move not done by then has failed (20)')
    ap.add_argument('--out', help='JSON path (default results/'
                    'storage-move-<time>.json)')
    ap.add_argument('--rate-limit-mbps', type=int, default=0,
                    help="the agent's copy cap, MB/s (default: none)")
    ap.add_argument('--qemu-granularity', type=int, default=0,
                    help="blockdev-mirror's granularity in bytes (default: "
                    "QEMU's, 64 KiB for an nbd target)")
    ap.add_argument('--report', metavar='JSON',
                    help='no run: recompute the medians, verdicts, tables '
                    'and figure of an earlier run from its JSON')
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.report:
        return rereport(args.report)
    args.size = fclab.parse_size(args.size)
    runs = 1 if args.quick else args.runs
    stamp = time.strftime('%Y%m%d-%H%M%S')
    out = args.out or os.path.join(ROOT, 'results',
                                   'storage-move-%s.json' % stamp)
    imgdir = None
    res = {'invocation': fclab.invocation('bench/storage_move.py',
                                          argv if argv is not None
                                          else sys.argv[1:]),
           'machine': fclab.machine(), 'agent': fclab.agent_build(),
           'params': dict((k, v) for k, v in vars(args).items()),
           'runs': [], 'load': [os.getloadavg()[0]]}
    res['machine']['qemu'] = fclab._version(['qemu-storage-daemon',
                                             '--version']).splitlines()[0]
    workdir = '/var/tmp/fcache-smove-%s' % stamp
    with fclab.Lab(workdir) as lab:
        imgdir = '/dev/shm/fcache-smove-%s' % stamp
        os.makedirs(imgdir)
        try:
            agent = lab.agent('agent', 16 * MiB, log_level='warning')
            bench = Bench(args, lab, imgdir, agent)
            for rep in range(runs):
                res['runs'].append(one_run(bench, rep, args))
        finally:
            shutil.rmtree(imgdir, ignore_errors=True)
    res['load'].append(os.getloadavg()[0])
    res['median'] = aggregate(res['runs'], args.size)
    res['auto'] = choose_auto(args, Media(args))
    res['verdicts'] = verdicts(res['median'], res['auto'])
    report(res)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.rmtree(workdir, ignore_errors=True)
    finish(res, out)
    return 0


if __name__ == '__main__':
    sys.exit(fclab.run_main(main, None, 'storage move benchmark'))
