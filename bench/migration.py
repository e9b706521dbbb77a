#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Migration benchmark: the transfer protocol against its peers, same run.

  rate      a rate-limited background copy (firepan_if): achieved rate as a
            fraction of the limit (target >= 0.9)
  stream    an unthrottled copy (firepan, measured as its downtime) between
            two agents with migration_tls = none against a plain TCP stream
            of the same bytes on the same loopback
            (fcache_agent/build/tcp_blast): fraction of the plain stream
            (target >= 0.6), and CPU seconds per GiB on each side; and
            against the least such a copy can do (copy_floor: the same
            bytes from the source's cache file, in the protocol's frames
            with their CRC-32C, over plain TCP into a file, one thread
            per side)
  tls       the same copy between two agents with migration_tls = psk
            (TLS 1.3, the default) against two with none, taking turns:
            fraction of the plaintext copy (target >= 0.8)
  firepan   firepan downtime for several cache sizes: it must grow linearly
            (least-squares fit, r^2 and ms per MiB)
  downtime  downtime of firepan_if and hybrid against none (target: within
            100 ms)
  cold      an unthrottled copy (firepan and hybrid) of a cache that is not
            in memory, as at a scale larger than RAM, after the VM's hits
            reordered its LRU (every block read once more in random order):
            rate against reading the same cache file from the same device
            (the peers: sequentially, and 4 KiB blocks at random with 255
            in flight), and CPU seconds per GiB on the source

Medians of --runs runs.  Results go to results/migration-<timestamp>.json.
Run with bench/run-migration.sh (installs what it needs first).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nbd  # noqa: E402  (Debian's python3-libnbd)

from nova_ext import agent as fc_agent  # noqa: E402
from nova_ext import migration  # noqa: E402
from nova_ext import units  # noqa: E402

AGENT = os.environ.get('FCACHE_AGENT_BIN') or os.path.join(
    ROOT, 'fcache_agent', 'build', 'fcache-agent')
BLAST = os.path.join(ROOT, 'fcache_agent', 'build', 'tcp_blast')
FLOOR = os.path.join(ROOT, 'fcache_agent', 'build', 'copy_floor')
MiB = 1024 * 1024


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.01)
    raise RuntimeError('timed out waiting for %s' % what)


class Lab(object):
    """Shared storage (nbdkit) and two agents on loopback."""

    def __init__(self, workdir, origin_size, cache_size,
                 tls_modes=('none', 'none')):
        self.dir = workdir
        self.procs = []
        origin = os.path.join(workdir, 'origin.img')
        with open(origin, 'wb') as f:
            # Real data, so the page cache and the copy move real bytes.
            chunk = os.urandom(MiB)
            for _ in range(origin_size // MiB):
                f.write(chunk)
        self.origin_sock = os.path.join(workdir, 'origin.sock')
        self.procs.append(subprocess.Popen(
            ['nbdkit', '-f', '--exit-with-parent', '-U', self.origin_sock,
             'file', origin], stderr=subprocess.DEVNULL))
        wait_for(lambda: os.path.exists(self.origin_sock), 10, 'nbdkit')
        self.origin_uri = 'nbd+unix:///?socket=%s' % self.origin_sock
        self.pids = []
        self.agents = [self._agent(n, cache_size, tls) for n, tls in
                       zip('abcdefgh', tls_modes)]

    def cache_file(self, agent_index):
        """The cache file of an agent (the default, in its state_dir)."""
        return os.path.join(self.dir, 'abcdefgh'[agent_index], 'state',
                            'cache.img')

    def pair(self, tls):
        """The (source, destination) agents of this TLS mode, with pids."""
        i = 2 * (self.modes.index(tls) // 2)
        return self.agents[i:i + 2], self.pids[i:i + 2]

    def _agent(self, name, cache_size, tls):
        d = os.path.join(self.dir, name)
        os.makedirs(d)
        sock = os.path.join(d, 'ctl.sock')
        conf = os.path.join(d, 'agent.conf')
        with open(conf, 'w') as f:
            f.write('[agent]\ncontrol_socket = %s\nstate_dir = %s/state\n'
                    'export_dir = %s/exp\ncache_size = %d\n'
                    'migration_listen = 127.0.0.1:%d\nlog_level = warning\n'
                    'migration_tls = %s\n'
                    # The origin's NBD socket lies in the scratch folder.
                    'origin_prefixes = %s/\n'
                    % (sock, d, d, cache_size, free_port(), tls, self.dir))
        self.modes = getattr(self, 'modes', []) + [tls]
        log = open(os.path.join(d, 'agent.log'), 'w')
        self.procs.append(subprocess.Popen([AGENT, '--config', conf],
                                           stderr=log))
        self.pids.append(self.procs[-1].pid)
        wait_for(lambda: os.path.exists(sock), 10, 'agent %s' % name)
        return fc_agent.AgentClient(sock, timeout=600)

    def close(self):
        for p in reversed(self.procs):
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def cpu_s(pid):
    """User + system CPU seconds of a process so far."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


PERF_DIR = []     # --perf: where each migration's profile goes


def start_perf(pids, what):
    """Perf record of both agents from start to finish of one migration.

    (--perf DIR): where the copy spends its CPU, without the warm-up.
    """
    if not PERF_DIR:
        return None
    out = os.path.join(PERF_DIR[0], '%s-%s.data' % (what, time.strftime(
        '%H%M%S')))
    p = subprocess.Popen(['perf', 'record', '-q', '-g', '-F', '4999', '-o',
                          out, '-p', ','.join(str(x) for x in pids)],
                         stderr=subprocess.DEVNULL)
    time.sleep(0.3)       # perf attaches before the copy begins
    return p


def stop_perf(p):
    if p:
        p.send_signal(signal.SIGINT)
        p.wait(30)


def warm(client, vid, origin_uri, cache_bytes, policy='read_only'):
    res = client.attach_volume(vid, origin_uri, cache_size=cache_bytes,
                               write_policy=policy)
    h = nbd.NBD()
    h.connect_uri(res['export_uri'])
    for off in range(0, cache_bytes, 1 * MiB):
        h.pread(MiB, off)
    h.shutdown()
    return client.show_volume(vid)['cached_blocks']


def run_migration(lab, vid, strategy, rate_mbps=None, tls='none'):
    """One migration, phase by phase; returns timings and the summary.

    With the CPU seconds each agent spent from start to finish.
    """
    (src, dst), pids = lab.pair(tls)
    p = migration.prepare(src, dst, vid, strategy, rate_mbps)
    mid = p['migration_id']
    perf = start_perf(pids, '%s-%s' % (strategy, tls))
    cpu0 = [cpu_s(x) for x in pids]
    migration.start(src, dst, mid)
    t_switch = time.monotonic()
    migration.switchover(src, dst, mid)
    wait_for(lambda: migration.status(dst, mid)['state'] in
             ('completed', 'failed'), 600, 'completion')
    transfer_s = time.monotonic() - t_switch
    t_finish = time.monotonic()
    result = migration.finish(src, dst, mid)
    result['finish_s'] = time.monotonic() - t_finish
    result['cpu_s'] = [cpu_s(x) - c for x, c in zip(pids, cpu0)]
    stop_perf(perf)
    result['transfer_s'] = transfer_s
    # Finish releases the source's copy of the volume, detach the
    # destination's: both forget every block, and grow with the cache.
    t_detach = time.monotonic()
    dst.detach_volume(vid)
    result['detach_s'] = time.monotonic() - t_detach
    return result


def bench_rate(lab, runs, cache, rate_mbps):
    ratios = []
    for i in range(runs):
        vid = 'rate%d-%d' % (rate_mbps, i)
        warm(lab.pair('none')[0][0], vid, lab.origin_uri, cache)
        r = run_migration(lab, vid, 'firepan_if', rate_mbps)
        achieved = r['bytes_transferred'] / r['transfer_s']
        ratios.append(achieved / (rate_mbps * 1e6))
    return {'rate_limit_mbps': rate_mbps, 'cache_bytes': cache,
            'achieved_over_limit': ratios,
            'median': statistics.median(ratios)}


def blast(nbytes):
    port = free_port()
    rx = subprocess.Popen([BLAST, 'recv', str(port)], stdout=subprocess.PIPE,
                          text=True)
    assert rx.stdout.readline().strip() == 'ready'
    t0 = time.monotonic()
    subprocess.check_call([BLAST, 'send', '127.0.0.1', str(port),
                           str(nbytes)])
    out = rx.communicate(timeout=120)[0].split()
    return nbytes / (time.monotonic() - t0), int(out[0])


def copy_floor(src_path, dst_path, nbytes):
    """copy_floor: nbytes of src_path into a fresh file, as the agents do.

    The destination file is allocated first, as the agent's cache file is.
    Returns (bytes per second, source and destination CPU s per GiB).
    """
    with open(dst_path, 'wb') as f:
        os.posix_fallocate(f.fileno(), 0, nbytes)
    port = free_port()
    rx = subprocess.Popen([FLOOR, 'recv', str(port), dst_path],
                          stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == 'ready'
    c0 = os.times()
    t0 = time.monotonic()
    tx = subprocess.Popen([FLOOR, 'send', '127.0.0.1', str(port), src_path,
                           str(nbytes)])
    tx_ru = os.wait4(tx.pid, 0)[2]
    got = int(rx.communicate(timeout=120)[0].split()[0])
    secs = time.monotonic() - t0
    c1 = os.times()
    os.unlink(dst_path)
    assert got == nbytes
    gib = nbytes / float(1 << 30)
    tx_cpu = tx_ru.ru_utime + tx_ru.ru_stime
    both = (c1.children_user + c1.children_system
            - c0.children_user - c0.children_system)
    return nbytes / secs, tx_cpu / gib, (both - tx_cpu) / gib


def copy(lab, vid, cache, tls):
    """An unthrottled copy: firepan's downtime is the copy."""
    warm(lab.pair(tls)[0][0], vid, lab.origin_uri, cache)
    r = run_migration(lab, vid, 'firepan', tls=tls)
    gib = r['bytes_transferred'] / float(1 << 30)
    return {'bytes': r['bytes_transferred'],
            'bytes_per_s': r['bytes_transferred'] / r['downtime_s'],
            'src_cpu_s_per_gib': r['cpu_s'][0] / gib,
            'dst_cpu_s_per_gib': r['cpu_s'][1] / gib}


def bench_stream(lab, runs, cache):
    rows = []
    for i in range(runs):
        r = copy(lab, 'stream%d' % i, cache, 'none')
        peer, got = blast(r['bytes'])
        assert got == r['bytes']
        r['plain_tcp_bytes_per_s'] = peer
        r['ratio'] = r['bytes_per_s'] / peer
        # The volume's blocks are still in the source's cache file (its
        # first bytes: the copy took them all), in the page cache.
        floor, fsrc, fdst = copy_floor(lab.cache_file(0),
                                       os.path.join(lab.dir, 'floor.img'),
                                       r['bytes'] // 4096 * 4096)
        r['floor_bytes_per_s'] = floor
        r['floor_src_cpu_s_per_gib'] = fsrc
        r['floor_dst_cpu_s_per_gib'] = fdst
        r['ratio_floor'] = r['bytes_per_s'] / floor
        r['floor_over_tcp'] = floor / peer
        rows.append(r)
    med = {k: statistics.median(x[k] for x in rows) for k in rows[0]}
    return {'cache_bytes': cache, 'runs': rows, 'median': med}


def bench_tls(lab, runs, cache):
    rows = []
    for i in range(runs):
        # Take turns going first: the page cache and the load drift.
        order = ('psk', 'none') if i % 2 == 0 else ('none', 'psk')
        r = {m: copy(lab, 'tls-%s-%d' % (m, i), cache, m) for m in order}
        r['ratio'] = r['psk']['bytes_per_s'] / r['none']['bytes_per_s']
        rows.append(r)
    med = {m: {k: statistics.median(x[m][k] for x in rows)
               for k in rows[0][m]} for m in ('psk', 'none')}
    return {'cache_bytes': cache, 'runs': rows, 'median': med,
            'ratio': statistics.median(x['ratio'] for x in rows)}


def link_copy(lab, vid, cache, tls, link_mbps):
    """A firepan_if copy capped at a link's rate: what a real link gets."""
    warm(lab.pair(tls)[0][0], vid, lab.origin_uri, cache)
    r = run_migration(lab, vid, 'firepan_if', link_mbps, tls=tls)
    gib = r['bytes_transferred'] / float(1 << 30)
    return {'bytes': r['bytes_transferred'],
            'bytes_per_s': r['bytes_transferred'] / r['transfer_s'],
            'src_cpu_s_per_gib': r['cpu_s'][0] / gib,
            'dst_cpu_s_per_gib': r['cpu_s'][1] / gib}


def bench_tls_link(lab, runs, cache, link_mbps):
    """psk against none with the copy capped at link_mbps (e.g. 10 GbE)."""
    rows = []
    for i in range(runs):
        order = ('psk', 'none') if i % 2 == 0 else ('none', 'psk')
        r = {m: link_copy(lab, 'tlslink-%s-%d' % (m, i), cache, m,
                          link_mbps) for m in order}
        r['ratio'] = r['psk']['bytes_per_s'] / r['none']['bytes_per_s']
        rows.append(r)
    med = {m: {k: statistics.median(x[m][k] for x in rows)
               for k in rows[0][m]} for m in ('psk', 'none')}
    return {'cache_bytes': cache, 'link_mbps': link_mbps, 'runs': rows,
            'median': med,
            'ratio': statistics.median(x['ratio'] for x in rows)}


def linear_fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    icpt = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (icpt + slope * x)) ** 2 for x, y in zip(xs, ys))
    return slope, icpt, 1 - ss_res / ss_tot if ss_tot else 1.0


def bench_firepan(lab, runs, sizes):
    med = []
    for size in sizes:
        d = []
        for i in range(runs):
            vid = 'fp%d-%d' % (size // MiB, i)
            warm(lab.agents[0], vid, lab.origin_uri, size)
            d.append(run_migration(lab, vid, 'firepan')['downtime_s'])
        med.append(statistics.median(d))
    slope, icpt, r2 = linear_fit([s / MiB for s in sizes], med)
    return {'sizes_mib': [s // MiB for s in sizes], 'downtime_s': med,
            'ms_per_mib': slope * 1000, 'intercept_ms': icpt * 1000,
            'r2': r2}


def scramble(client, vid, cache_bytes):
    """Read every cached block once more, in random order.

    All hits: the LRU no longer follows the order of the cache file.
    """
    uri = client.show_volume(vid).get('export_uri')
    if not uri:
        raise RuntimeError('volume-show %s gave no export_uri' % vid)
    subprocess.run(['fio', '--name=scramble', '--ioengine=nbd',
                    '--uri=%s' % uri, '--rw=randread', '--bs=4k',
                    '--iodepth=16', '--size=%d' % cache_bytes,
                    '--output=/dev/null'], check=True)


def drop_from_memory(path):
    """Evict a file from the page cache, as if it were larger than RAM."""
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def device_read_rate(path, nbytes, random=False):
    """A peer: the device reading the file's first nbytes.

    Sequentially in 1 MiB requests, 16 in flight (the most the device
    gives), or each 4 KiB block once in random order, 255 in flight (the
    most it gives to a copy whose order is scattered over the file, one
    frame's worth queued); past the page cache (fio, libaio, O_DIRECT).
    """
    how = (['--rw=randread', '--bs=4k', '--iodepth=255'] if random
           else ['--rw=read', '--bs=1M', '--iodepth=16'])
    out = subprocess.run(['fio', '--name=device', '--filename=%s' % path,
                          '--readonly', '--ioengine=libaio', '--direct=1',
                          '--size=%d' % nbytes, '--output-format=json']
                         + how,
                         check=True, capture_output=True, text=True).stdout
    job = json.loads(out[out.index('{'):])['jobs'][0]['read']
    return job['bw_bytes']


def rss_kib(pid, field):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1])
    raise RuntimeError('no %s in /proc/%d/status' % (field, pid))


def bench_cold(lab, runs, cache):
    """One size of the cold copy, with how much the source's RSS grew."""
    rows = []
    src_pid = lab.pair('none')[1][0]
    for i in range(runs):
        r = {}
        for strategy in ('firepan', 'hybrid'):
            vid = 'cold-%s-%d' % (strategy, i)
            warm(lab.agents[0], vid, lab.origin_uri, cache)
            scramble(lab.agents[0], vid, cache)
            drop_from_memory(lab.cache_file(0))
            # The peak RSS (VmHWM) restarts from here (proc(5),
            # clear_refs): what the copy itself holds at its largest.
            with open('/proc/%d/clear_refs' % src_pid, 'w') as f:
                f.write('5')
            rss0 = rss_kib(src_pid, 'VmRSS')
            m = run_migration(lab, vid, strategy)
            peak_growth = (rss_kib(src_pid, 'VmHWM') - rss0) * 1024
            secs = m['downtime_s'] if strategy == 'firepan' \
                else m['transfer_s']
            gib = m['bytes_transferred'] / float(1 << 30)
            r[strategy] = {'bytes': m['bytes_transferred'],
                           'bytes_per_s': m['bytes_transferred'] / secs,
                           'src_cpu_s_per_gib': m['cpu_s'][0] / gib,
                           'dst_cpu_s_per_gib': m['cpu_s'][1] / gib,
                           'downtime_s': m['downtime_s'],
                           'src_peak_rss_growth_bytes': peak_growth,
                           'finish_s': m['finish_s'],
                           'dst_detach_s': m['detach_s']}
        r['device_bytes_per_s'] = device_read_rate(lab.cache_file(0), cache)
        r['device_random_bytes_per_s'] = device_read_rate(
            lab.cache_file(0), cache, random=True)
        for strategy in ('firepan', 'hybrid'):
            r[strategy]['ratio'] = (r[strategy]['bytes_per_s']
                                    / r['device_bytes_per_s'])
            r[strategy]['ratio_random'] = (r[strategy]['bytes_per_s']
                                           / r['device_random_bytes_per_s'])
        rows.append(r)
    med = {k: statistics.median(x[k] for x in rows)
           for k in ('device_bytes_per_s', 'device_random_bytes_per_s')}
    for strategy in ('firepan', 'hybrid'):
        med[strategy] = {k: statistics.median(x[strategy][k] for x in rows)
                         for k in rows[0][strategy]}
    return {'cache_bytes': cache, 'runs': rows, 'median': med}


def cold_sizes(text, default):
    """--cold-sizes: '256M,1G,4G' -> bytes, in 4 KiB blocks."""
    if not text:
        return [default]
    out = []
    for part in text.split(','):
        try:
            n = units.parse_size(part)
        except ValueError as e:
            raise ValueError('--cold-sizes: %r: %s' % (part, e))
        if n < MiB or n % 4096:
            raise ValueError('--cold-sizes: %r must be at least 1 MiB and '
                             'a whole number of 4 KiB blocks' % part)
        out.append(n)
    return out


def bench_downtime(lab, runs, cache):
    out = {}
    for strategy in ('none', 'firepan_if', 'hybrid'):
        d = []
        for i in range(runs):
            vid = 'dt-%s-%d' % (strategy, i)
            warm(lab.agents[0], vid, lab.origin_uri, cache)
            d.append(run_migration(lab, vid, strategy)['downtime_s'])
        out[strategy] = statistics.median(d)
    out['firepan_if_minus_none_ms'] = (out['firepan_if'] - out['none']) * 1e3
    out['hybrid_minus_none_ms'] = (out['hybrid'] - out['none']) * 1e3
    return out


SECTIONS = ('rate', 'stream', 'tls', 'tls_link', 'firepan', 'downtime',
            'cold')


def report(r, args):
    print('migration benchmark (medians of %d runs; load %s -> %s)'
          % (args.runs, r['load'][0], r['load'][1]))
    for x in r.get('rate', []):
        print('  rate limit %.0f MB/s: achieved %.3f x the limit'
              % (x['rate_limit_mbps'], x['median']))
    if 'stream' in r:
        m = r['stream']['median']
        print('  unthrottled copy of %d MiB (plaintext): %.3f x a plain TCP '
              'stream (%.0f vs %.0f MB/s); CPU s/GiB source %.2f, '
              'destination %.2f' % (
                  r['stream']['cache_bytes'] // MiB, m['ratio'],
                  m['bytes_per_s'] / 1e6, m['plain_tcp_bytes_per_s'] / 1e6,
                  m['src_cpu_s_per_gib'], m['dst_cpu_s_per_gib']))
        print('    the least such a copy does (copy_floor): %.3f x the plain '
              'stream (%.0f MB/s; CPU s/GiB %.2f, %.2f); the agents reach '
              '%.3f x it' % (
                  m['floor_over_tcp'], m['floor_bytes_per_s'] / 1e6,
                  m['floor_src_cpu_s_per_gib'], m['floor_dst_cpu_s_per_gib'],
                  m['ratio_floor']))
    for key, what in (('tls', 'unthrottled copy of %d MiB'),
                      ('tls_link', 'copy of %d MiB capped at %.0f MB/s')):
        if key not in r:
            continue
        t, m = r[key], r[key]['median']
        head = what % ((t['cache_bytes'] // MiB, t['link_mbps'])
                       if key == 'tls_link' else (t['cache_bytes'] // MiB,))
        print('  %s, migration_tls = psk: %.3f x none (%.0f vs %.0f MB/s); '
              'CPU s/GiB source %.2f vs %.2f, destination %.2f vs %.2f' % (
                  head, t['ratio'], m['psk']['bytes_per_s'] / 1e6,
                  m['none']['bytes_per_s'] / 1e6,
                  m['psk']['src_cpu_s_per_gib'],
                  m['none']['src_cpu_s_per_gib'],
                  m['psk']['dst_cpu_s_per_gib'],
                  m['none']['dst_cpu_s_per_gib']))
    if 'firepan' in r:
        print('  firepan downtime: %s s for %s MiB: %.2f ms/MiB, r^2 %.3f'
              % (['%.3f' % x for x in r['firepan']['downtime_s']],
                 r['firepan']['sizes_mib'], r['firepan']['ms_per_mib'],
                 r['firepan']['r2']))
    if 'downtime' in r:
        print('  downtime vs none: firepan_if %+.1f ms, hybrid %+.1f ms'
              % (r['downtime']['firepan_if_minus_none_ms'],
                 r['downtime']['hybrid_minus_none_ms']))
    for c in r.get('cold', []):
        report_cold(c)


def report_cold(c):
    m = c['median']
    print('  copy of %d MiB from a cache not in memory, LRU reordered; the '
          'same file read from the device: %.0f MB/s sequentially, %.0f MB/s '
          '4 KiB at random (255 in flight)'
          % (c['cache_bytes'] // MiB, m['device_bytes_per_s'] / 1e6,
             m['device_random_bytes_per_s'] / 1e6))
    for strategy in ('firepan', 'hybrid'):
        print('    %-8s %.0f MB/s: %.3f x the device sequentially, %.3f x at '
              'random; CPU s/GiB source %.2f, destination %.2f; downtime '
              '%.3f s; source RSS peak +%.1f MiB; finish (the source forgets '
              'the volume) %.2f s, detach at the destination %.2f s'
              % (strategy, m[strategy]['bytes_per_s'] / 1e6,
                 m[strategy]['ratio'], m[strategy]['ratio_random'],
                 m[strategy]['src_cpu_s_per_gib'],
                 m[strategy]['dst_cpu_s_per_gib'],
                 m[strategy]['downtime_s'],
                 m[strategy]['src_peak_rss_growth_bytes'] / MiB,
                 m[strategy]['finish_s'], m[strategy]['dst_detach_s']))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--rate-mbps', default='20',
                    help='rate limits to check, comma-separated (MB/s)')
    ap.add_argument('--link-mbps', type=float, default=1250,
                    help='the link cap of the tls_link section (MB/s; '
                    '1250 is 10 GbE)')
    ap.add_argument('--only', default=','.join(SECTIONS),
                    help='sections to run, comma-separated: %s'
                    % ','.join(SECTIONS))
    ap.add_argument('--quick', action='store_true',
                    help='small sizes, for a smoke run')
    ap.add_argument('--cold-sizes', metavar='SIZES',
                    help='cache sizes of the cold section, comma-separated '
                    '(e.g. 256M,1G,4G; default 256M, 64M with --quick); the '
                    'lab\'s origin and caches grow to the largest')
    ap.add_argument('--perf', metavar='DIR',
                    help='perf record both agents during each migration '
                    '(perf report -i DIR/<strategy>-<tls>-<time>.data)')
    args = ap.parse_args(argv)
    if args.perf:
        os.makedirs(args.perf, exist_ok=True)
        PERF_DIR.append(os.path.abspath(args.perf))
    only = args.only.split(',')
    for s in only:
        if s not in SECTIONS:
            ap.error('unknown section %r' % s)
    sizes = [8 * MiB, 16 * MiB, 32 * MiB] if args.quick else \
        [16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB]
    try:
        colds = cold_sizes(args.cold_sizes, 2 * sizes[-1])
    except ValueError as e:
        ap.error(str(e))
    lab_size = max([2 * sizes[-1]] + (colds if 'cold' in only else []))
    workdir = tempfile.mkdtemp(prefix='fcache-migbench-', dir='/var/tmp')
    lab = Lab(workdir, origin_size=lab_size, cache_size=lab_size,
              tls_modes=('none', 'none', 'psk', 'psk')
              if 'tls' in only or 'tls_link' in only else ('none', 'none'))
    results = {'machine': {'nproc': os.cpu_count(), 'uname': os.uname()[2]},
               'runs': args.runs, 'load': ['%.2f' % os.getloadavg()[0]]}
    try:
        if 'rate' in only:
            results['rate'] = [bench_rate(lab, args.runs, sizes[1], float(x))
                               for x in args.rate_mbps.split(',')]
        # The largest volume the lab holds: a 128 MiB copy lasts a tenth
        # of a second, too short for a stable rate or CPU time (clock
        # ticks) on a shared machine.
        if 'stream' in only:
            results['stream'] = bench_stream(lab, args.runs, 2 * sizes[-1])
        if 'tls' in only:
            results['tls'] = bench_tls(lab, args.runs, 2 * sizes[-1])
        if 'tls_link' in only:
            results['tls_link'] = bench_tls_link(lab, args.runs,
                                                 2 * sizes[-1],
                                                 args.link_mbps)
        if 'firepan' in only:
            results['firepan'] = bench_firepan(lab, args.runs, sizes)
        if 'downtime' in only:
            results['downtime'] = bench_downtime(lab, args.runs, sizes[1])
        if 'cold' in only:
            results['cold'] = [bench_cold(lab, args.runs, n) for n in colds]
    finally:
        lab.close()
        shutil.rmtree(workdir, ignore_errors=True)
    results['load'].append('%.2f' % os.getloadavg()[0])
    report(results, args)
    os.makedirs(os.path.join(ROOT, 'results'), exist_ok=True)
    path = os.path.join(ROOT, 'results', 'migration-%s.json'
                        % time.strftime('%Y%m%d-%H%M%S'))
    with open(path, 'w') as f:
        json.dump(results, f, indent=2)
    print('results: %s' % path)


if __name__ == '__main__':
    main()
