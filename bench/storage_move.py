#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Live storage migration between media, measured as the paper measures it.

The paper is Zhou et al., "Optimizing virtual machine live storage
migration in heterogeneous storage environment" (VEE '13); issue 35 asks
for its metrics, its workload, ``auto`` checked against the best measured
scheme and its mixing experiment (§7.4).  A volume's origin moves from A
to B while a workload runs on it, in four directions (hdd->ssd, ssd->hdd,
hdd->hdd, ssd->ssd), by each system:

  dbt, mirror, lr, slr, aio   fcache-agent's ``volume-move`` on a ucache
                              volume (write_through, 2 MiB cache) whose
                              NBD export the workload drives
  qemu-bg, qemu-wb            qemu-storage-daemon exporting A while
                              ``blockdev-mirror`` (copy-mode background,
                              write-blocking) copies A to B, completed
                              (pivot to B) once ready

The media (fixed before the run, storage_move_metrics.emulated_media):
each origin is an nbdkit over a file on tmpfs, one request at a time
(``noparallel``), each request delayed (``delay``) and its bytes
rate-limited (``rate``), logged (``log``: the bytes written to each
origin, the wear).  The HDD's rate and delay are options; the SSD's
follow from the paper's ratios (Table 1's bandwidths, Table 2's IOPS).

The workloads (Table 7, storage_move_metrics.PROFILES) are unpaced:
each of a profile's ``depth`` threads issues its next request when the
last one completes, reads and writes in the profile's mix and block size.

The figures (§4; storage_move_metrics):

  lambda_time  move time / time of a plain copy of the image between
               the same two emulated media with nothing else running
               (libnbd, 1 MiB requests as the agent's copier, read and
               write overlapped; the fastest of --plain-repeats copies)
  lambda_io    1 - throughput during the move / throughput of the same
               workload and system with no move on the faster medium
  lambda_wear  workload bytes written to SSD-like origins (a source's
               writes, a destination's beyond one copy of the image)
               / bytes the workload wrote
  MC           lambda_time * (g*lambda_wear + (1-g)*lambda_io)

A move not done within --timeout-s is aborted and reported as timed out
(lambda_time and MC infinite), never dropped.

``auto`` (movecost.choose_scheme, with the emulated media's bandwidths
and the workload's rates measured with no move on the source) is
checked per cell (direction, workload, gamma) against the measured best
of the paper's five schemes, and against QEMU's modes.

Mixing (§7.4): --mix-volumes volumes on shared media (one nbdkit per
medium and side, serving every volume on it), a fraction epsilon SSD to
SSD and as many HDD to HDD, the rest across, all moved at once: once
with each of LR, SLR and AIO for all, and with the planner's mix
(movecost.plan_moves) for each gamma.  The batch's MC is the sum of its
moves' (§7.4); the paper's claims are that the mix is never worse than
the best single scheme and up to 48 % lower.

Run with bench/run-storage-move.sh (it builds what is needed first);
--smoke is the CI-sized run of tests/functional/test_storage_move_bench.py.
Results go to --out (JSON), with the report (.txt), the tables
(.rst.txt) and the figures (.png, -mixing.png) beside it.
"""

import argparse
import json
import math
import os
import queue
import random
import re
import shutil
import socket
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run as bench/storage_move.py, the script's directory comes first on the
# path and its bench.py hides the bench package: look from the root.
sys.path[:] = [p for p in sys.path
               if os.path.abspath(p or '.') != os.path.join(ROOT, 'bench')]
sys.path.insert(0, ROOT)

import nbd  # noqa: E402  (python3-libnbd)

from bench import storage_move_metrics as smm  # noqa: E402
from nova_ext import movecost  # noqa: E402
from tools.fcdemo import lab as fclab  # noqa: E402

MiB = 1024 * 1024
DIRECTIONS = (('hdd', 'ssd'), ('ssd', 'hdd'), ('hdd', 'hdd'),
              ('ssd', 'ssd'))
FC_SCHEMES = movecost.SCHEMES
QEMU_MODES = {'qemu-bg': 'background', 'qemu-wb': 'write-blocking'}
SYSTEMS = FC_SCHEMES + tuple(sorted(QEMU_MODES))
# The paper's figure for each direction, and its tables' row order.
FIGURE = {'hdd->ssd': 11, 'ssd->hdd': 12, 'ssd->ssd': 13, 'hdd->hdd': 14}
TABLE_ORDER = ('ssd->ssd', 'hdd->ssd', 'ssd->hdd', 'hdd->hdd')
TERMINAL = ('done', 'failed', 'aborted')
CACHE_BYTES = 2 * MiB
COPY_CHUNK = MiB
POLL_S = 0.02
# What a move that ended is: done, failed (the scheme gave up or an
# error), or timed out (aborted by the benchmark at --timeout-s).
DONE, FAILED, TIMEOUT = 'done', 'failed', 'timeout'


def dname(d):
    return '%s->%s' % d


def faster(src, dst):
    return 'ssd' if 'ssd' in (src, dst) else 'hdd'


# -- the media --------------------------------------------------------------

class Pool(object):
    """One emulated disk: an nbdkit serving every file of a directory.

    One volume is one export (its file's name); every volume of a pool
    shares its one-request-at-a-time queue, delay and bandwidth, as
    volumes on one disk array do.
    """

    def __init__(self, lab, medium, imgdir, name, volumes):
        """``volumes``: {export name: template file to copy, or a size}."""
        self.lab = lab
        self.medium = medium
        self.dir = os.path.join(imgdir, name)
        os.makedirs(self.dir)
        self.sizes = {}
        for vol, what in volumes.items():
            path = os.path.join(self.dir, vol)
            if isinstance(what, str):
                shutil.copyfile(what, path)
            else:
                with open(path, 'wb') as f:
                    f.truncate(what)
            self.sizes[vol] = os.path.getsize(path)
        self.logfile = os.path.join(imgdir, '%s.nbdlog' % name)
        m = medium
        self.proc, uri = lab.nbdkit(
            name, ['file', 'dir=%s' % self.dir,
                   'logfile=%s' % self.logfile,
                   'rdelay=%dms' % m.delay_ms, 'wdelay=%dms' % m.delay_ms,
                   'rate=%dM' % round(m.mbps * 8), 'burstiness=0.02'],
            filters=['log', 'noparallel', 'delay', 'rate'])
        self.sock = uri.split('socket=', 1)[1]

    def uri(self, vol):
        return 'nbd+unix:///%s?socket=%s' % (vol, self.sock)

    def close(self):
        """Stop the server; return {volume: bytes written to it}."""
        if self.proc is not None:
            self.lab.stop(self.proc)
            self.proc = None
        written = parse_nbdkit_log(self.logfile)
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self.logfile)
        except OSError:
            pass
        return dict((v, written.get(v, 0)) for v in self.sizes)


_CONNECT = re.compile(r'connection=(\d+) Connect export=("?)([^" ]*)\2 ')
_WRITE = re.compile(r'connection=(\d+) (?:Write|Zero) id=\d+ '
                    r'offset=0x[0-9a-f]+ count=0x([0-9a-f]+)')


def parse_nbdkit_log(path):
    """{export name: bytes written or zeroed} from nbdkit's log filter."""
    export_of = {}
    out = {}
    with open(path) as f:
        for line in f:
            m = _CONNECT.search(line)
            if m:
                export_of[m.group(1)] = m.group(3)
                continue
            m = _WRITE.search(line)
            if m:
                vol = export_of.get(m.group(1), '')
                out[vol] = out.get(vol, 0) + int(m.group(2), 16)
    return out


# -- the workload -----------------------------------------------------------

class Workload(object):
    """A Table 7 profile, unpaced.

    One connection and thread per request in flight, each issuing its
    next request when the last completes.
    """

    def __init__(self, uri, size, profile, seed):
        self.size = size
        self.profile = profile
        self.stop_flag = threading.Event()
        self.handles = []
        for _ in range(profile.depth):
            h = nbd.NBD()
            h.connect_uri(uri)
            self.handles.append(h)
        self.records = [[] for _ in range(profile.depth)]
        self.errors = []
        self.seed = seed
        self.threads = []
        rnd = random.Random(seed)
        self.bufs = [rnd.randbytes(profile.block_size) for _ in range(4)]

    def _run(self, i):
        p = self.profile
        h = self.handles[i]
        rec = self.records[i]
        rnd = random.Random(self.seed * 100 + i)
        blocks = self.size // p.block_size
        # A sequential stream per thread, over its own slice.
        lo = i * blocks // p.depth
        hi = max(lo + 1, (i + 1) * blocks // p.depth)
        nxt = lo
        try:
            while not self.stop_flag.is_set():
                if p.pattern == 'random':
                    off = rnd.randrange(blocks) * p.block_size
                else:
                    off = nxt * p.block_size
                    nxt = nxt + 1 if nxt + 1 < hi else lo
                write = rnd.random() >= p.read_share
                t = time.monotonic()
                if write:
                    h.pwrite(self.bufs[len(rec) % 4], off)
                else:
                    h.pread(p.block_size, off)
                end = time.monotonic()
                rec.append((end, write, end - t))
        except Exception as exc:   # reported by summary()
            if not self.stop_flag.is_set():
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
        bs = self.profile.block_size
        recs = [r for rs in self.records for r in rs]
        inside = [r for r in recs if t0 <= r[0] <= t1]
        span = max(t1 - t0, 1e-6)
        lat = [r[2] for r in inside]
        return {'ops': len(inside), 'seconds': span,
                'bytes_per_s': len(inside) * bs / span,
                'read_bytes_per_s': sum(1 for r in inside if not r[1]) * bs
                / span,
                'write_bytes_per_s': sum(1 for r in inside if r[1]) * bs
                / span,
                'max_latency_ms': max(lat or [0]) * 1e3,
                'mean_latency_ms': (sum(lat) / len(lat) * 1e3
                                    if lat else 0.0),
                'write_bytes_total': sum(1 for r in recs if r[1]) * bs,
                'ops_total': len(recs), 'errors': list(self.errors)}


def timed_copy(a_uri, b_uri, size):
    """Copy ``size`` bytes from A to B; return the seconds the data took.

    1 MiB requests (the agent copier's chunk), a reader and a writer
    overlapped, B flushed at the end; connecting is not timed.
    """
    ha, hb = nbd.NBD(), nbd.NBD()
    ha.connect_uri(a_uri)
    hb.connect_uri(b_uri)
    chunks = queue.Queue(maxsize=2)
    failed = []

    def reader():
        try:
            for off in range(0, size, COPY_CHUNK):
                chunks.put((off, ha.pread(min(COPY_CHUNK, size - off), off)))
        except Exception as exc:
            failed.append(repr(exc))
        chunks.put(None)

    try:
        t0 = time.monotonic()
        th = threading.Thread(target=reader, daemon=True)
        th.start()
        while True:
            item = chunks.get()
            if item is None:
                break
            hb.pwrite(item[1], item[0])
        hb.flush()
        elapsed = time.monotonic() - t0
        th.join()
    finally:
        for h in (ha, hb):
            try:
                h.shutdown()
            except Exception:
                pass
    if failed:
        raise fclab.LabError('plain copy failed: %s' % failed[0])
    return elapsed


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

    def __init__(self, lab, name, a_uri, b_uri=None):
        self.lab = lab
        d = os.path.join(lab.workdir, name)
        os.makedirs(d, exist_ok=True)
        self.qmp_path = os.path.join(d, 'qmp.sock')
        self.nbd_path = os.path.join(d, 'nbd.sock')
        argv = ['qemu-storage-daemon',
                '--chardev', 'socket,id=qmp0,path=%s,server=on,wait=off'
                % self.qmp_path,
                '--monitor', 'chardev=qmp0',
                '--blockdev', 'driver=nbd,node-name=src,' + nbd_node(a_uri)]
        if b_uri:
            argv += ['--blockdev', 'driver=nbd,node-name=dst,' +
                     nbd_node(b_uri)]
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


def nbd_node(uri):
    """qemu's nbd blockdev options for an ``nbd+unix:///NAME?socket=S``."""
    export, sock = re.match(r'nbd\+unix:///([^?]*)\?socket=(.*)$',
                            uri).groups()
    return 'server.type=unix,server.path=%s%s' % (
        sock, ',export=%s' % export if export else '')


# -- the runs ---------------------------------------------------------------

class Bench(object):
    def __init__(self, args, lab, imgdir, agent):
        self.args = args
        self.lab = lab
        self.imgdir = imgdir
        self.agent = agent
        self.media = smm.emulated_media(args.hdd_mbps, args.hdd_delay_ms)
        self.templates = {}
        self.n = 0

    def _name(self, what):
        self.n += 1
        return '%s-%d' % (what, self.n)

    def template(self, size):
        """An image of random data (one per size, made once)."""
        if size not in self.templates:
            path = os.path.join(self.imgdir, 'template-%d.img' % size)
            with open(path, 'wb') as f:
                for _ in range(size // MiB):
                    f.write(os.urandom(MiB))
                f.write(os.urandom(size % MiB))
            self.templates[size] = path
        return self.templates[size]

    def pool(self, medium, volumes):
        return Pool(self.lab, self.media[medium], self.imgdir,
                    self._name('%s' % medium), volumes)

    def pair(self, src, dst, size):
        a = self.pool(src, {'vol': self.template(size)})
        b = self.pool(dst, {'vol': size})
        return a, b

    def plain_copy(self, src, dst, size):
        """Seconds of the fastest of --plain-repeats idle copies A to B."""
        best = None
        for _ in range(self.args.plain_repeats):
            a, b = self.pair(src, dst, size)
            try:
                s = timed_copy(a.uri('vol'), b.uri('vol'), size)
            finally:
                a.close()
                b.close()
            best = s if best is None else min(best, s)
        return best

    def _export(self, system, vid, uri):
        """Attach ``uri`` through ``system``; return (export, cleanup)."""
        if system == 'fcache':
            c = self.agent.client
            export = c.attach_volume(vid, uri, cache_size=CACHE_BYTES,
                                     write_policy='write_through')
            return export['export_uri'], lambda: c.detach_volume(vid)
        qsd = QSD(self.lab, vid, uri)
        return qsd.uri, qsd.close

    def baseline(self, system, medium, profile, seed):
        """The profile's throughput with no move, on one medium alone."""
        size = self.args.size
        a = self.pool(medium, {'vol': self.template(size)})
        cleanup = None
        try:
            uri, cleanup = self._export(system, self._name('base'),
                                        a.uri('vol'))
            wl = Workload(uri, size, profile, seed)
            t0 = time.monotonic()
            wl.start()
            time.sleep(self.args.baseline_s)
            t1 = time.monotonic()
            wl.stop()
            summ = wl.summary(t0, t1)
            if summ['errors']:
                raise fclab.LabError('no-move workload %s on %s (%s) '
                                     'failed: %s' % (profile.name, medium,
                                                     system,
                                                     summ['errors'][0]))
            return {'bytes_per_s': summ['bytes_per_s'],
                    'read_bytes_per_s': summ['read_bytes_per_s'],
                    'write_bytes_per_s': summ['write_bytes_per_s']}
        finally:
            if cleanup:
                cleanup()
            a.close()

    def move(self, system, src, dst, profile, seed):
        a, b = self.pair(src, dst, self.args.size)
        out = {'system': system}
        try:
            if system in QEMU_MODES:
                out.update(self._move_qemu(system, a, b, profile, seed))
            else:
                out.update(self._move_fcache(system, a, b, profile, seed))
        finally:
            out['a_write_bytes'] = a.close()['vol']
            out['b_write_bytes'] = b.close()['vol']
        return out

    def _wait_moves(self, vids, t_start, t0, deadline):
        """Poll the agent's moves until each ends; abort those past deadline.

        Yields ``(vid, (status, outcome, end time))`` as each ends.
        """
        c = self.agent.client
        ended = {}
        while len(ended) < len(vids):
            for vid in vids:
                if vid in ended:
                    continue
                st = c.move_status(vid)
                now = time.monotonic()
                if st['state'] in TERMINAL:
                    end = now
                    if st['state'] == 'done':
                        # It ended when the agent let requests go to B,
                        # not when this loop looked.
                        end = min(now, t_start[vid] + st['elapsed_s'])
                    ended[vid] = (st, DONE if st['state'] == 'done'
                                  else FAILED, end)
                elif now > deadline:
                    try:
                        c.abort_move(vid)
                    except Exception as exc:   # it may have just ended
                        st = dict(st, abort_error=str(exc))
                    limit = time.monotonic() + 30
                    while st['state'] not in TERMINAL and \
                            time.monotonic() < limit:
                        time.sleep(POLL_S)
                        st = c.move_status(vid)
                    ended[vid] = (st, TIMEOUT, now)
                if vid in ended:
                    yield vid, ended[vid]
            if len(ended) < len(vids):
                time.sleep(POLL_S)

    def _start_move(self, vid, to_uri, scheme):
        extra = {}
        if self.args.rate_limit_mbps:
            extra['rate_limit_mbps'] = self.args.rate_limit_mbps
        self.agent.client.move_volume(vid, to_uri, scheme=scheme, **extra)
        # The agent starts its clock during that call: counting from its
        # return can only make the move look longer.
        return time.monotonic()

    def _move_fcache(self, scheme, a, b, profile, seed):
        vid = self._name('mv')
        uri, cleanup = self._export('fcache', vid, a.uri('vol'))
        wl = None
        try:
            wl = Workload(uri, self.args.size, profile, seed)
            wl.start()
            t0 = time.monotonic()
            t_start = {vid: self._start_move(vid, b.uri('vol'), scheme)}
            deadline = t0 + self.args.timeout_s
            ends = list(self._wait_moves([vid], t_start, t0, deadline))
            st, outcome, t1 = ends[0][1]
        finally:
            if wl:
                wl.stop()
            cleanup()
        summ = wl.summary(t0, t1)
        if summ['errors'] and outcome == DONE:
            outcome = FAILED
        return {'outcome': outcome,
                'error': ('timed out after %g s (aborted)'
                          % self.args.timeout_s if outcome == TIMEOUT
                          else st.get('error') or
                          (summ['errors'] and summ['errors'][0]) or None),
                'move_s': t1 - t0, 'downtime_ms': st.get('downtime_ms'),
                'agent_status': st, 'workload': summ}

    def _move_qemu(self, system, a, b, profile, seed):
        qsd = QSD(self.lab, self._name('qsd'), a.uri('vol'), b.uri('vol'))
        outcome, err, downtime = DONE, None, None
        wl = None
        try:
            wl = Workload(qsd.uri, self.args.size, profile, seed)
            wl.start()
            t0 = time.monotonic()
            deadline = t0 + self.args.timeout_s
            try:
                extra = {}
                if self.args.qemu_granularity:
                    extra['granularity'] = self.args.qemu_granularity
                qsd.qmp.cmd('blockdev-mirror', job_id='mv', device='src',
                            target='dst', sync='full',
                            copy_mode=QEMU_MODES[system], **extra)
                ev = qsd.qmp.wait_event(('BLOCK_JOB_READY',
                                         'BLOCK_JOB_COMPLETED'),
                                        max(0.1, deadline - time.monotonic()))
                if ev['event'] == 'BLOCK_JOB_READY':
                    tc = time.monotonic()
                    qsd.qmp.cmd('block-job-complete', device='mv')
                    ev = qsd.qmp.wait_event(
                        ('BLOCK_JOB_COMPLETED',),
                        max(0.1, deadline - time.monotonic()))
                    downtime = (time.monotonic() - tc) * 1e3
                if ev['data'].get('error'):
                    outcome, err = FAILED, ev['data']['error']
            except fclab.LabError as exc:
                # Background mode may never become ready (the workload
                # dirties faster than the job copies): like DBT that does
                # not converge, a move that did not end in time.  Any
                # other QMP error is a failed move.
                if 'no QMP event' in str(exc):
                    outcome, err = TIMEOUT, 'timed out after %g s (%s)' % (
                        self.args.timeout_s, exc)
                else:
                    outcome, err = FAILED, str(exc)
                try:
                    qsd.qmp.cmd('block-job-cancel', device='mv', force=True)
                except Exception:   # the QMP stream may be cut mid-line
                    pass
            t1 = time.monotonic()
        finally:
            if wl:
                wl.stop()
            qsd.close()
        summ = wl.summary(t0, t1)
        if summ['errors'] and outcome == DONE:
            outcome, err = FAILED, summ['errors'][0]
        return {'outcome': outcome, 'error': err, 'move_s': t1 - t0,
                'downtime_ms': downtime, 'workload': summ}

    # -- mixing (§7.4) ------------------------------------------------------

    def batch(self, assignment, profile, seed):
        """Move every volume of ``assignment`` at once on shared media.

        ``assignment``: [(src, dst, scheme)], volume i is ``v<i>``.  The
        volumes on one medium and side share one Pool.  Each volume's
        workload runs from the start of the batch until its own move
        ends.  Returns [{'src', 'dst', 'scheme', 'outcome', 'move_s',
        'workload', 'a_write_bytes', 'b_write_bytes', 'downtime_ms'}].
        """
        size = self.args.mix_size
        vols = ['v%d' % i for i in range(len(assignment))]
        want = {}
        for vol, (src, dst, _) in zip(vols, assignment):
            want.setdefault(('a', src), {})[vol] = self.template(size)
            want.setdefault(('b', dst), {})[vol] = size
        pools = {}
        ids, wls, cleanups, out = {}, {}, [], []
        try:
            for key, volumes in sorted(want.items()):
                pools[key] = self.pool(key[1], volumes)
            for i, (vol, (src, dst, _)) in enumerate(zip(vols, assignment)):
                ids[vol] = self._name('mix')
                uri, cleanup = self._export('fcache', ids[vol],
                                            pools[('a', src)].uri(vol))
                cleanups.append(cleanup)
                wls[vol] = Workload(uri, size, profile, seed + i)
            for wl in wls.values():
                wl.start()
            t0 = time.monotonic()
            t_start = {}
            for vol, (src, dst, scheme) in zip(vols, assignment):
                t_start[ids[vol]] = self._start_move(
                    ids[vol], pools[('b', dst)].uri(vol), scheme)
            deadline = t0 + self.args.timeout_s * len(vols)
            ends = {}
            by_id = dict((v, k) for k, v in ids.items())
            for vid, (st, outcome, t1) in self._wait_moves(
                    list(ids.values()), t_start, t0, deadline):
                vol = by_id[vid]
                wls[vol].stop()
                ends[vol] = (st, outcome, t1)
        finally:
            for wl in wls.values():
                wl.stop()
            for cleanup in cleanups:
                cleanup()
            written = dict((key, p.close()) for key, p in pools.items())
        for vol, (src, dst, scheme) in zip(vols, assignment):
            st, outcome, t1 = ends[vol]
            summ = wls[vol].summary(t0, t1)
            if summ['errors'] and outcome == DONE:
                outcome = FAILED
            out.append({'src': src, 'dst': dst, 'scheme': scheme,
                        'outcome': outcome, 'move_s': t1 - t0,
                        'downtime_ms': st.get('downtime_ms'),
                        'error': st.get('error'), 'workload': summ,
                        'a_write_bytes': written[('a', src)][vol],
                        'b_write_bytes': written[('b', dst)][vol]})
        return out


def model_workload(args, size, rates, profile):
    """movecost's Workload for a volume whose no-move rates are ``rates``.

    The rates are the profile's measured with no move on the volume's
    source, as a VM's I/O rate is known before its move; its requests in
    flight and their size are the profile's (Table 7), the media's
    bandwidths and 4 KiB IOPS the emulated ones.
    """
    prof = smm.PROFILES[profile]
    media = smm.emulated_media(args.hdd_mbps, args.hdd_delay_ms).values()
    return movecost.Workload(
        size, rates['write_bytes_per_s'], rates['read_bytes_per_s'],
        bandwidth_bps=dict((m.name, m.mbps * 1e6) for m in media),
        iops=dict((m.name, m.iops) for m in media),
        depth=prof.depth, request_bytes=prof.block_size)


def plan_mix(args, directions, rates, gamma):
    """The planner's mix for a batch: [(src, dst, scheme)]."""
    moves = [{'volume_id': 'v%d' % i, 'from_medium': src, 'to_medium': dst,
              'workload': model_workload(args, args.mix_size, rates[src],
                                         args.mix_profile),
              'wear_weight': gamma} for i, (src, dst) in enumerate(directions)]
    plan = movecost.plan_moves(moves, schemes=smm.MIX_SCHEMES)
    return [(src, dst, p['scheme'])
            for (src, dst), p in zip(directions, plan['moves'])]


def one_run(bench, rep, args, profiles, log):
    run = {'plain_copy_s': {}, 'plain_copy_mix_s': {},
           'baseline': {'fcache': {}, 'qemu': {}}, 'moves': {}, 'mixing': {}}
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        run['plain_copy_s'][d] = bench.plain_copy(src, dst, args.size)
        run['plain_copy_mix_s'][d] = (
            run['plain_copy_s'][d] if args.mix_size == args.size
            else bench.plain_copy(src, dst, args.mix_size))
    for fam in ('fcache', 'qemu'):
        for medium in ('hdd', 'ssd'):
            run['baseline'][fam][medium] = dict(
                (p.name, bench.baseline(fam, medium, p, 1000 + rep))
                for p in profiles)
    log('  run %d: plain copy %s s' % (rep + 1, dict(
        (k, round(v, 3)) for k, v in run['plain_copy_s'].items())))
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        run['moves'][d] = {}
        for p in profiles:
            run['moves'][d][p.name] = {}
            k = rep % len(SYSTEMS)
            for system in SYSTEMS[k:] + SYSTEMS[:k]:
                cell = bench.move(system, src, dst, p, 2000 + rep)
                run['moves'][d][p.name][system] = cell
                log('  run %d %-9s %-7s %-8s %-7s %6.2f s  downtime %s ms'
                    '  %.0f KB/s' % (rep + 1, d, p.name, system,
                                     cell['outcome'], cell['move_s'],
                                     fmt(cell['downtime_ms'], 1),
                                     cell['workload']['bytes_per_s'] / 1e3))
    mp = smm.PROFILES[args.mix_profile]
    rates = dict((m, run['baseline']['fcache'][m][mp.name])
                 for m in ('hdd', 'ssd'))
    for eps in args.mix_eps:
        dirs = smm.batch_directions(args.mix_volumes, eps)
        done = {}
        ekey = '%g' % eps
        run['mixing'][ekey] = {'directions': [dname(d) for d in dirs],
                               'single': {}, 'mix': {}}
        configs = [('single', s, [(a, b, s) for a, b in dirs])
                   for s in smm.MIX_SCHEMES]
        configs += [('mix', '%g' % g, plan_mix(args, dirs, rates, g))
                    for g in smm.GAMMAS]
        for kind, key, assignment in configs:
            tag = tuple(assignment)
            if tag not in done:
                done[tag] = bench.batch(assignment, mp, 3000 + rep)
                log('  run %d mixing eps %s %-6s %-4s %s' % (
                    rep + 1, ekey, kind, key, ' '.join(
                        '%s:%s:%s:%.2fs' % (dname((m['src'], m['dst'])),
                                            m['scheme'], m['outcome'],
                                            m['move_s'])
                        for m in done[tag])))
            run['mixing'][ekey][kind][key] = {
                'assignment': [list(x) for x in assignment],
                'volumes': done[tag]}
    return run


# -- the analysis (from the JSON, so that --report can redo it) -------------

def _family(system):
    return 'qemu' if system in QEMU_MODES else 'fcache'


def _figures(cell, plain_s, best_bps, src, dst, size, gammas):
    wl = cell['workload']
    f = smm.cell_figures(
        cell['move_s'] if cell['outcome'] == DONE else None, plain_s,
        wl['bytes_per_s'], best_bps, src, dst, cell['a_write_bytes'],
        cell['b_write_bytes'], size, wl['write_bytes_total'], gammas)
    f.update({'downtime_ms': cell['downtime_ms'], 'move_s': cell['move_s'],
              'outcome': cell['outcome'],
              'max_latency_ms': wl['max_latency_ms']})
    return f


def _median_cell(per):
    out = {}
    for k in per[0]:
        if k == 'outcome':
            continue
        out[k] = smm.median([p[k] for p in per])
    for o in (DONE, FAILED, TIMEOUT):
        out['runs_%s' % o] = sum(1 for p in per if p['outcome'] == o)
    # A cell's status: done if its median move finished.
    out['status'] = (DONE if out['runs_done'] * 2 > len(per) else
                     TIMEOUT if out['runs_timeout'] >= out['runs_failed']
                     else FAILED)
    return out


def analyse(res):
    """Medians, auto's verdicts, the paper's table and mixing, from runs."""
    p = res['params']
    runs = res['runs']
    profiles = p['profiles']
    gammas = smm.GAMMAS
    cells = {}
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        cells[d] = {}
        for prof in profiles:
            cells[d][prof] = {}
            for system in SYSTEMS:
                fam = _family(system)
                fast = faster(src, dst)
                per = [_figures(run['moves'][d][prof][system],
                                run['plain_copy_s'][d],
                                run['baseline'][fam][fast][prof][
                                    'bytes_per_s'],
                                src, dst, p['size'], gammas)
                       for run in runs]
                cells[d][prof][system] = _median_cell(per)
                cells[d][prof][system]['mc_range'] = dict(
                    ('%g' % g, [min(x['mc_%g' % g] for x in per),
                                max(x['mc_%g' % g] for x in per)])
                    for g in gammas)
    plain = dict((d, smm.median([r['plain_copy_s'][d] for r in runs]))
                 for d in res['runs'][0]['plain_copy_s'])
    media = smm.emulated_media(p['hdd_mbps'], p['hdd_delay_ms'])
    floors = dict((dname((s, t)), smm.copy_floor_s(p['size'], media, s, t))
                  for s, t in DIRECTIONS)
    # auto against the best measured scheme, per cell.
    rates = {}
    for m in ('hdd', 'ssd'):
        rates[m] = dict((prof, dict(
            (k, smm.median([r['baseline']['fcache'][m][prof][k]
                            for r in runs]))
            for k in ('read_bytes_per_s', 'write_bytes_per_s')))
            for prof in profiles)
    args = argparse.Namespace(**p)
    auto = []
    for src, dst in DIRECTIONS:
        d = dname((src, dst))
        for prof in profiles:
            wl = model_workload(args, p['size'], rates[src][prof], prof)
            for g in gammas:
                scheme, costs = movecost.choose_scheme(src, dst, wl, g)
                key = 'mc_%g' % g
                v = smm.auto_verdict(
                    scheme, dict((s, cells[d][prof][s][key])
                                 for s in FC_SCHEMES),
                    dict((q, cells[d][prof][q][key]) for q in QEMU_MODES))
                v.update({'direction': d, 'profile': prof, 'gamma': g,
                          'measured': dict((s, cells[d][prof][s][key])
                                           for s in SYSTEMS),
                          'expected': dict((c.scheme, c.mc)
                                           for c in costs)})
                auto.append(v)
    # The paper's findings, on the mean over the profiles.
    paper = []
    for d in TABLE_ORDER:
        for fig in ('lambda_time', 'lambda_io') + tuple(
                'mc_%g' % g for g in gammas):
            vals = dict((s, smm.mean([cells[d][prof][s][fig]
                                      for prof in profiles]))
                        for s in FC_SCHEMES)
            row = smm.against_paper(d, fig, vals)
            row.update({'direction': d, 'figure': fig, 'values': vals})
            paper.append(row)
    downtime = dict((d, dict((s, smm.median(
        [cells[d][prof][s]['downtime_ms'] for prof in profiles]))
        for s in SYSTEMS)) for d in TABLE_ORDER)
    below_one = [{'direction': d, 'profile': prof, 'system': s,
                  'lambda_time': c['lambda_time']}
                 for d in cells for prof in cells[d]
                 for s, c in cells[d][prof].items()
                 if c['status'] == DONE and c['lambda_time'] < 1]
    return {'cells': cells, 'plain_copy_s': plain, 'copy_floor_s': floors,
            'auto': auto, 'paper': paper, 'downtime': downtime,
            'below_one': below_one, 'mixing': analyse_mixing(res),
            'media': dict((k, m._asdict()) for k, m in media.items())}


def analyse_mixing(res):
    p = res['params']
    runs = res['runs']
    mp = p['mix_profile']
    gammas = smm.GAMMAS
    out = {'rows': [], 'curves': {}}
    for ekey in runs[0]['mixing']:
        per_run = []
        for run in runs:
            mix = run['mixing'][ekey]
            best = dict((m, run['baseline']['fcache'][m][mp]['bytes_per_s'])
                        for m in ('hdd', 'ssd'))

            def figs(vols, gs):
                return [smm.cell_figures(
                    v['move_s'] if v['outcome'] == DONE else None,
                    run['plain_copy_mix_s'][dname((v['src'], v['dst']))],
                    v['workload']['bytes_per_s'],
                    best[faster(v['src'], v['dst'])], v['src'], v['dst'],
                    v['a_write_bytes'], v['b_write_bytes'], p['mix_size'],
                    v['workload']['write_bytes_total'], gs) for v in vols]

            totals = {'single': {}, 'mix': {}, 'curves': {}}
            for s, x in mix['single'].items():
                f = figs(x['volumes'], smm.PLOT_GAMMAS)
                totals['single'][s] = dict(
                    ('%g' % g, smm.batch_mc(v['mc_%g' % g] for v in f))
                    for g in gammas)
                totals['curves'][s] = [smm.batch_mc(v['mc_%g' % g]
                                                    for v in f)
                                       for g in smm.PLOT_GAMMAS]
            for gk, x in mix['mix'].items():
                f = figs(x['volumes'], (float(gk),))
                totals['mix'][gk] = smm.batch_mc(v['mc_%s' % gk] for v in f)
            per_run.append(totals)
        out['curves'][ekey] = dict(
            (s, [smm.median([t['curves'][s][i] for t in per_run])
                 for i in range(len(smm.PLOT_GAMMAS))])
            for s in per_run[0]['curves'])
        for g in gammas:
            gk = '%g' % g
            single = dict((s, smm.median([t['single'][s][gk]
                                          for t in per_run]))
                          for s in per_run[0]['single'])
            mixed = smm.median([t['mix'][gk] for t in per_run])
            row = smm.mixing_verdict(single, mixed)
            row.update({'eps': float(ekey), 'gamma': g, 'single': single,
                        'assignment': runs[0]['mixing'][ekey]['mix'][gk][
                            'assignment'],
                        'directions': runs[0]['mixing'][ekey][
                            'directions']})
            out['rows'].append(row)
    out['claims'] = smm.mixing_claims(out['rows'])
    return out


# -- the report -------------------------------------------------------------

def fmt(x, p=2):
    if x is None:
        return '-'
    if isinstance(x, float) and math.isinf(x):
        return 'inf'
    return '%.*f' % (p, x)


def _pct(x):
    return '-' if x is None else '%+.0f %%' % (100 * x)


def _status(c):
    """A cell's figure label: its status when its median did not finish."""
    if c['status'] == DONE:
        return ''
    return '%s %d/%d' % (c['status'], c['runs_%s' % c['status']],
                         c['runs_done'] + c['runs_failed'] +
                         c['runs_timeout'])


def _rst_table(header, rows):
    cols = list(zip(*([header] + rows)))
    widths = [max(len(str(x)) for x in c) for c in cols]
    rule = '  '.join('=' * w for w in widths)
    out = [rule, '  '.join(str(h).ljust(w) for h, w in zip(header, widths)),
           rule]
    for r in rows:
        out.append('  '.join(str(x).ljust(w) for x, w in zip(r, widths)))
    out.append(rule)
    return '\n'.join(out) + '\n'


def tables(res):
    """Every table of the report: [(title, header, rows)]."""
    a = res['analysis']
    p = res['params']
    out = []
    rows = [[d, fmt(a['plain_copy_s'][d], 3), fmt(a['copy_floor_s'][d], 3),
             fmt(a['plain_copy_s'][d] / a['copy_floor_s'][d])]
            for d in TABLE_ORDER]
    out.append(('Plain copies of the %s image (the denominator of '
                'lambda_time), against the media\'s bandwidth'
                % fclab_size(p['size']),
                ['direction', 'plain copy s', 'size / slower rate s',
                 'ratio'], rows))
    g_cols = ['MC g=%g' % g for g in smm.GAMMAS]
    for d in sorted(FIGURE, key=FIGURE.get):
        rows = []
        for prof in p['profiles']:
            for s in SYSTEMS:
                c = a['cells'][d][prof][s]
                rows.append([prof, s, fmt(c['lambda_time']),
                             fmt(c['lambda_io']), fmt(c['lambda_wear'])] +
                            [fmt(c['mc_%g' % g], 3) for g in smm.GAMMAS] +
                            [fmt(c['move_s']), fmt(c['downtime_ms'], 0),
                             _status(c) or 'done'])
        out.append(('Figure %d: %s' % (FIGURE[d], d),
                    ['workload', 'system', 'l_time', 'l_io', 'l_wear'] +
                    g_cols + ['move s', 'downtime ms', 'status'], rows))
    rows = []
    for v in a['auto']:
        rows.append([v['direction'], v['profile'], '%g' % v['gamma'],
                     v['auto'], fmt(v['auto_mc'], 3), '/'.join(v['best']),
                     fmt(v['best_mc'], 3), _pct(v['excess']),
                     fmt(v['measured']['qemu-bg'], 3),
                     fmt(v['measured']['qemu-wb'], 3),
                     {True: 'yes', False: 'no', None: '-'}[v['below_qemu']],
                     v['verdict']])
    out.append(('auto against the best measured scheme (measured MC)',
                ['direction', 'workload', 'gamma', 'auto', 'auto MC',
                 'best', 'best MC', 'auto above', 'qemu-bg', 'qemu-wb',
                 'below QEMU', 'verdict'], rows))
    rows = []
    for r in a['paper']:
        rows.append([r['direction'], r['figure'], '/'.join(r['paper']),
                     '/'.join(r['measured']) or '-',
                     ' '.join('%s %s' % (s, fmt(x, 3)) for s, x in
                              sorted(r['values'].items())),
                     'agrees' if r['agree'] else 'DIFFERS'])
    out.append(('Against the paper (section 7.3): the best scheme per '
                'direction, mean over the workloads',
                ['direction', 'figure', 'paper', 'measured', 'values',
                 'verdict'], rows))
    rows = []
    for d in TABLE_ORDER:
        rows.append([d] + ['%s (%d)' % (fmt(a['downtime'][d][s], 0),
                                        smm.PAPER_DOWNTIME_MS[d][s])
                           for s in FC_SCHEMES] +
                    [fmt(a['downtime'][d][q], 0) for q in sorted(QEMU_MODES)])
    out.append(('Table 5: downtime, ms, measured (paper), median over the '
                'workloads', ['direction'] + list(SYSTEMS), rows))
    m = a['mixing']
    rows = []
    for r in m['rows']:
        rows.append(['%g' % r['eps'], '%g' % r['gamma']] +
                    [fmt(r['single'][s], 3) for s in smm.MIX_SCHEMES] +
                    [fmt(r['mix_mc'], 3),
                     ' '.join('%s%s:%s' % (x[0][0], x[1][0], x[2])
                              for x in r['assignment']),
                     r['best_single'], _pct(r['cut']),
                     'yes' if r['never_worse'] else 'NO'])
    out.append(('Mixing (section 7.4): batch MC of %d volumes moved at '
                'once (%s), one scheme for all against the planner\'s mix'
                % (p['mix_volumes'], p['mix_profile']),
                ['epsilon', 'gamma'] + list(smm.MIX_SCHEMES) +
                ['mix', 'mix (s: SSD, h: HDD)', 'best single', 'cut',
                 'never worse'], rows))
    c = m['claims']
    out.append(('The paper\'s mixing claims',
                ['claim', 'measured', 'verdict'],
                [['the mix is never worse than the best single scheme',
                  '%d of %d rows' % (sum(1 for r in m['rows']
                                         if r['never_worse']),
                                     len(m['rows'])),
                  'holds' if c['never_worse'] else 'FAILS'],
                 ['the mix cuts MC by up to 48 % (largest cut)',
                  _pct(c['largest_cut']),
                  'holds' if c['cut_48'] else 'FAILS']]))
    return out


def fclab_size(n):
    return '%d MiB' % (n // MiB) if n % MiB == 0 else '%d bytes' % n


def text_report(res):
    a = res['analysis']
    lines = []
    for title, header, rows in tables(res):
        lines.append('\n' + title)
        widths = [max(len(str(x)) for x in col)
                  for col in zip(*([header] + rows))]
        for r in [header] + rows:
            lines.append('  '.join(str(x).ljust(w)
                                   for x, w in zip(r, widths)).rstrip())
    n = len(a['auto'])
    agree = sum(1 for v in a['auto'] if v['agree'])
    lines.append('\nauto agrees with the measured best in %d of %d cells'
                 % (agree, n))
    if a['below_one']:
        lines.append('completed cells with lambda_time below 1 (faster than '
                     'the plain copy): %s' % ', '.join(
                         '%s %s %s %.2f' % (x['direction'], x['profile'],
                                            x['system'], x['lambda_time'])
                         for x in a['below_one']))
    else:
        lines.append('every completed cell has lambda_time >= 1')
    return '\n'.join(lines) + '\n'


def rst(res):
    parts = []
    for title, header, rows in tables(res):
        parts += ['\n' + title + '\n', _rst_table(header, rows)]
    return '\n'.join(parts)


def figures(res, png, png_mix):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    a = res['analysis']
    profiles = res['params']['profiles']
    fig, axes = plt.subplots(4, 3, figsize=(15, 16))
    width = 0.8 / max(1, len(profiles))
    for i, d in enumerate(sorted(FIGURE, key=FIGURE.get)):
        ax_t, ax_io, ax_mc = axes[i]
        for j, prof in enumerate(profiles):
            xs = [k + (j - (len(profiles) - 1) / 2.0) * width
                  for k in range(len(SYSTEMS))]
            cells = a['cells'][d][prof]
            lt = [cells[s]['lambda_time'] for s in SYSTEMS]
            ax_t.bar(xs, [0 if math.isinf(x) else x for x in lt], width,
                     label=prof)
            for x, v in zip(xs, lt):
                if math.isinf(v):
                    ax_t.text(x, 0.05, 'timeout/failed', rotation=90,
                              ha='center', va='bottom', fontsize=6,
                              color='tab:red')
            ax_io.bar(xs, [cells[s]['lambda_io'] for s in SYSTEMS], width,
                      label=prof)
        for ax, what in ((ax_t, 'lambda_time (move / plain copy)'),
                         (ax_io, 'lambda_IO (share of I/O lost)')):
            ax.set_xticks(range(len(SYSTEMS)))
            ax.set_xticklabels(SYSTEMS, rotation=45)
            ax.set_xlabel('system')
            ax.set_ylabel(what)
            ax.legend(fontsize=7, title='workload')
        ax_t.axhline(1.0, color='grey', linestyle=':')
        ax_t.set_title('Fig. %d(a) %s: migration time' % (FIGURE[d], d))
        ax_io.set_title('(b) %s: I/O penalty' % d)
        for s in SYSTEMS:
            ys = []
            for g in smm.PLOT_GAMMAS:
                ys.append(smm.mean([smm.migration_cost(
                    a['cells'][d][prof][s]['lambda_time'],
                    a['cells'][d][prof][s]['lambda_io'],
                    a['cells'][d][prof][s]['lambda_wear'], g)
                    for prof in profiles]))
            ys = [None if y is None or math.isinf(y) else y for y in ys]
            ax_mc.plot(smm.PLOT_GAMMAS, ys,
                       marker='o' if s in QEMU_MODES else '.',
                       linestyle='--' if s in QEMU_MODES else '-', label=s)
        ax_mc.set_title('(c) %s: MC, mean over the workloads' % d)
        ax_mc.set_xlabel('gamma (weight of wear)')
        ax_mc.set_ylabel('migration cost')
        ax_mc.legend(fontsize=7, title='system (unfinished: no line)')
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)

    m = a['mixing']
    ekeys = sorted(m['curves'], key=float)
    fig, axes = plt.subplots(1, max(1, len(ekeys)),
                             figsize=(5 * max(1, len(ekeys)), 4.5),
                             squeeze=False)
    for ax, ekey in zip(axes[0], ekeys):
        for s, ys in sorted(m['curves'][ekey].items()):
            ax.plot(smm.PLOT_GAMMAS, [None if y is None or math.isinf(y)
                                      else y for y in ys], label='all %s' % s)
        rows = [r for r in m['rows'] if '%g' % r['eps'] == ekey]
        ax.plot([r['gamma'] for r in rows],
                [None if math.isinf(r['mix_mc']) else r['mix_mc']
                 for r in rows], 'k*', markersize=12, label='planner\'s mix')
        ax.set_title('Fig. 15: epsilon %s (%d volumes)' % (
            ekey, res['params']['mix_volumes']))
        ax.set_xlabel('gamma (weight of wear)')
        ax.set_ylabel('batch migration cost (sum of the moves\')')
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_mix, dpi=80)
    plt.close(fig)


def finish(res, out):
    """Analyse, print, and write the JSON, report, tables and figures."""
    res['analysis'] = analyse(res)
    text = text_report(res)
    print(text)
    base = os.path.splitext(out)[0]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        json.dump(res, f, indent=1, default=str)
    with open(base + '.txt', 'w') as f:
        f.write(text)
    with open(base + '.rst.txt', 'w') as f:
        f.write(rst(res))
    figures(res, base + '.png', base + '-mixing.png')
    print('results: %s\nreport: %s.txt\ntables: %s.rst.txt\nfigures: %s.png'
          ', %s-mixing.png' % (out, base, base, base, base))


# -- main -------------------------------------------------------------------

SMOKE = {'size': '16M', 'runs': 1, 'profiles': 'IOM_4', 'plain_repeats': 2,
         'baseline_s': 0.5, 'timeout_s': 8.0, 'mix_eps': '0.25',
         'mix_volumes': 4, 'mix_size': '8M'}


def build_parser():
    """The benchmark's options: media, workload and run (the probe's too)."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--smoke', action='store_true',
                    help='the CI-sized run: %s' % ', '.join(
                        '%s %s' % kv for kv in sorted(SMOKE.items())))
    ap.add_argument('--runs', type=int, default=3,
                    help='runs; the figures are medians (3)')
    ap.add_argument('--size', default='64M', help='image size (64M)')
    ap.add_argument('--profiles', default=','.join(smm.PROFILES),
                    help='Table 7 workloads (%s)' % ','.join(smm.PROFILES))
    ap.add_argument('--hdd-mbps', type=float, default=50,
                    help="the HDD's streaming rate, MB/s (50); the SSD's "
                    "follows from the paper's ratio")
    ap.add_argument('--hdd-delay-ms', type=int, default=7,
                    help="the HDD's delay per request, whole ms (7); the "
                    "SSD's follows from the paper's IOPS ratio")
    ap.add_argument('--plain-repeats', type=int, default=3,
                    help='idle copies per direction and run; the fastest '
                    'is the plain copy (3)')
    ap.add_argument('--baseline-s', type=float, default=3.0,
                    help='seconds of each no-move workload (3)')
    ap.add_argument('--timeout-s', type=float, default=None,
                    help='a move not done by then is aborted and reported '
                    'as timed out (default: 15 x the HDD copy time of the '
                    'image, at least 10 s; a batch gets that per volume)')
    ap.add_argument('--mix-eps', default='0,0.25,0.5',
                    help='the shares epsilon of same-media moves (section '
                    '7.4) (0,0.25,0.5)')
    ap.add_argument('--mix-volumes', type=int, default=4,
                    help='volumes per batch (4)')
    ap.add_argument('--mix-size', default=None,
                    help='size of each batch volume (default: --size)')
    ap.add_argument('--mix-profile', default='IOM_4',
                    help="the batch volumes' workload (IOM_4)")
    ap.add_argument('--out', help='JSON path (default results/'
                    'storage-move-<time>.json)')
    ap.add_argument('--rate-limit-mbps', type=int, default=0,
                    help="the agent's copy cap, MB/s (default: none)")
    ap.add_argument('--qemu-granularity', type=int, default=0,
                    help="blockdev-mirror's granularity in bytes (default: "
                    "QEMU's, 64 KiB for an nbd target)")
    ap.add_argument('--report', metavar='JSON',
                    help='no run: redo the analysis, report, tables and '
                    'figures of an earlier run from its JSON')
    return ap


def parse_args(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.smoke:
        given = set(a.split('=')[0].lstrip('-').replace('-', '_')
                    for a in (argv if argv is not None else sys.argv[1:]))
        for k, v in SMOKE.items():
            if k not in given:
                setattr(args, k, v)
    args.size = fclab.parse_size(args.size)
    args.mix_size = (fclab.parse_size(args.mix_size) if args.mix_size
                     else args.size)
    args.profiles = [x for x in args.profiles.split(',') if x]
    bad = [x for x in args.profiles + [args.mix_profile]
           if x not in smm.PROFILES]
    if bad:
        ap.error('unknown workload(s) %s (of %s)' % (
            ', '.join(bad), ', '.join(smm.PROFILES)))
    args.mix_eps = [float(x) for x in args.mix_eps.split(',') if x]
    try:
        media = smm.emulated_media(args.hdd_mbps, args.hdd_delay_ms)
        for e in args.mix_eps:
            smm.batch_directions(args.mix_volumes, e)
    except ValueError as exc:
        ap.error(str(exc))
    if args.timeout_s is None:
        args.timeout_s = max(10.0, 15 * args.size /
                             (media['hdd'].mbps * 1e6))
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.report:
        with open(args.report) as f:
            res = json.load(f)
        finish(res, args.report)
        return 0
    stamp = time.strftime('%Y%m%d-%H%M%S')
    out = args.out or os.path.join(ROOT, 'results',
                                   'storage-move-%s.json' % stamp)
    params = dict(vars(args))
    params.pop('report')
    res = {'invocation': fclab.invocation('bench/storage_move.py',
                                          argv if argv is not None
                                          else sys.argv[1:]),
           'machine': fclab.machine(), 'agent': fclab.agent_build(),
           'params': params, 'runs': [], 'load': [os.getloadavg()[0]]}
    res['machine']['qemu'] = fclab._version(['qemu-storage-daemon',
                                             '--version']).splitlines()[0]
    profiles = [smm.PROFILES[x] for x in args.profiles]
    workdir = '/var/tmp/fcache-smove-%s-%d' % (stamp, os.getpid())
    t_start = time.monotonic()

    def log(msg):
        print(msg, flush=True)

    with fclab.Lab(workdir) as lab:
        imgdir = '/dev/shm/fcache-smove-%s-%d' % (stamp, os.getpid())
        os.makedirs(imgdir)
        try:
            agent = lab.agent('agent', 16 * MiB, log_level='warning')
            bench = Bench(args, lab, imgdir, agent)
            for rep in range(args.runs):
                res['runs'].append(one_run(bench, rep, args, profiles, log))
        finally:
            shutil.rmtree(imgdir, ignore_errors=True)
    res['load'].append(os.getloadavg()[0])
    res['duration_s'] = time.monotonic() - t_start
    shutil.rmtree(workdir, ignore_errors=True)
    finish(res, out)
    return 0


if __name__ == '__main__':
    sys.exit(fclab.run_main(main, None, 'storage move benchmark'))
