#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fcache benchmarks: every figure next to a peer measured in the same run.

  hit      fully cached 4 KiB random reads at queue depth 32 through the
           agent's NBD export, against nbdkit's file plugin serving the
           agent's own cache file (same bytes, same page cache, same
           client), and, for the record, nbdkit's cache filter (warm) in
           front of the origin file.
  miss     the cold-miss path: 4 KiB random reads of blocks never read
           before, through a fresh agent volume whose origin is an nbdkit
           file server, against fio reading that nbdkit server directly,
           and against nbdkit's own NBD proxy (the nbd plugin, no cache)
           in front of it: what any NBD-over-NBD server costs here.
  write    4 KiB random writes at queue depth 32 through a write_through
           volume (every write goes to the cache and to the origin, and is
           kept in the origin client's redo log until a flush), against fio
           writing the same nbdkit origin directly.
  memory   memory per cached block (agent accounting and RSS) and
           metadata bytes per cache block on disk.
  rbd      an RBD image in a Ceph cluster the benchmark starts
           (tools/ceph-box.sh): 4 KiB random reads through the agent's
           export, fully cached (hits) and cold (misses), against fio's
           own rbd engine (librbd) reading the image directly, with the
           messenger in secure mode (the agent's default) and in crc mode
           (librbd's default).

Each measurement is repeated --runs times (the peers alternate who goes
first) and medians are reported; ratios are computed per run, then their
median is taken.  Results are printed and saved in
results/bench-<timestamp>.json.  Started by bench/run.sh; see
doc/research/benchmarks.rst.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), 'tools'))

import ceph_box  # noqa: E402
from fcdemo import lab as L  # noqa: E402

SECTIONS = ('memory', 'hit', 'miss', 'write', 'rbd')
HOT_ID = 'bench-hot'
# Request size used to fill volumes: the agent's NBD workers keep buffers
# up to 1 MiB, so 1 MiB reads would add 1 MiB of RSS per worker thread.
FILL_BS = 128 * 1024


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--runs', type=int, default=3,
                   help='repetitions of each measurement; medians are '
                        'reported (default: %(default)s)')
    p.add_argument('--seconds', type=int, default=10,
                   help='length of each timed fio run of the hit test '
                        '(default: %(default)s)')
    p.add_argument('--region', default='1G',
                   help='cached region (= agent cache size) and cold-miss '
                        'region (default: %(default)s)')
    p.add_argument('--rbd-region', default='256M',
                   help='size of the RBD image of the rbd section (= its '
                        'agents\' cache size) (default: %(default)s)')
    p.add_argument('--numjobs', type=int, default=4,
                   help='fio jobs (one NBD connection each) for the hit '
                        'and miss tests (default: %(default)s)')
    p.add_argument('--iodepth', type=int, default=32,
                   help='fio iodepth per job (default: %(default)s)')
    p.add_argument('--nbd-threads', type=int, default=None,
                   help="agent nbd_threads (default: the agent's default)")
    p.add_argument('--origin-connections', type=int, default=None,
                   help="agent origin_connections (default: the agent's "
                        "default)")
    p.add_argument('--nbdkit-threads', type=int, default=None,
                   help="nbdkit -t (default: nbdkit's default)")
    p.add_argument('--only', default=','.join(SECTIONS),
                   help='comma-separated subset of %s' % ', '.join(SECTIONS))
    p.add_argument('--workdir', default=None,
                   help='scratch directory (default: a new one under '
                        '/var/tmp, removed at the end)')
    p.add_argument('--keep', action='store_true',
                   help='keep the scratch directory')
    p.add_argument('--results-dir', default=os.path.join(L.REPO, 'results'),
                   help='where bench-<timestamp>.json goes (default: '
                        '%(default)s)')
    p.add_argument('-v', '--verbose', action='store_true',
                   help='print every command as it is run')
    args = p.parse_args(argv)
    args.region_b = L.parse_size(args.region)
    if args.region_b % (args.numjobs * L.MiB):
        p.error('--region must be a multiple of numjobs MiB')
    args.rbd_region_b = L.parse_size(args.rbd_region)
    if args.rbd_region_b % (args.numjobs * 4 * L.MiB):
        p.error('--rbd-region must be a multiple of numjobs x 4 MiB')
    args.only = [s.strip() for s in args.only.split(',') if s.strip()]
    for s in args.only:
        if s not in SECTIONS:
            p.error('unknown section %r' % s)
    if args.runs < 1:
        p.error('--runs must be at least 1')
    return args


# The rbd section's ratios: (name, numerator, denominator), per run.
RBD_HIT_RATIOS = (
    ('agent / fio-rbd-secure', 'agent', 'fio-rbd-secure'),
    ('agent / fio-rbd-crc', 'agent', 'fio-rbd-crc'),
    ('fio-rbd-secure / fio-rbd-crc', 'fio-rbd-secure', 'fio-rbd-crc'))
RBD_MISS_RATIOS = (
    ('agent-secure / fio-rbd-secure', 'agent-secure', 'fio-rbd-secure'),
    ('agent-crc / fio-rbd-crc', 'agent-crc', 'fio-rbd-crc'),
    ('agent-secure / fio-rbd-crc', 'agent-secure', 'fio-rbd-crc'),
    ('agent-secure / agent-crc', 'agent-secure', 'agent-crc'),
    ('fio-rbd-secure / fio-rbd-crc', 'fio-rbd-secure', 'fio-rbd-crc'))


def ratios(run, which):
    """{name: run[num] IOPS / run[den] IOPS} for which."""
    return {name: run[num]['iops'] / run[den]['iops']
            for name, num, den in which}


def summary(runs, names, which):
    """Runs, with the median IOPS of each name and of each ratio."""
    med = {name: median([r[name]['iops'] for r in runs]) for name in names}
    med['ratios'] = {name: median([r['ratios'][name] for r in runs])
                     for name, _, _ in which}
    return {'runs': runs, 'median': med}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def delta_hits(before, after):
    h = after['read_hits'] - before['read_hits']
    m = after['read_misses'] - before['read_misses']
    return h, m


def server_us(cpu_s, totals):
    """Server CPU microseconds per 4 KiB request of a fio run."""
    ios = (totals['read_bytes'] + totals['write_bytes']) / 4096.0
    return cpu_s * 1e6 / ios if ios else None


class Bench(object):
    def __init__(self, lab, args):
        self.lab = lab
        self.args = args
        self.work = lab.workdir
        self.out = {}
        self.hot = None
        self.agent = None

    # -- fio command lines --------------------------------------------------

    @staticmethod
    def target(uri):
        """fio's engine options for uri: an NBD URI, or ('rbd', IMAGE).

        fio's rbd engine reads the ceph.conf named by $CEPH_CONF.
        """
        if isinstance(uri, tuple):
            return ['--ioengine=rbd', '--clientname=%s' % ceph_box.USER,
                    '--pool=%s' % ceph_box.POOL, '--rbdname=%s' % uri[1]]
        return ['--ioengine=nbd', '--uri=%s' % uri]

    def randread_timed(self, uri, size, seconds, rw='randread'):
        """4 KiB random reads (or rw) over [0, size), for `seconds`."""
        a = self.args
        return ['--name=%s' % rw] + self.target(uri) + [
                '--rw=%s' % rw, '--bs=4k', '--iodepth=%d' % a.iodepth,
                '--numjobs=%d' % a.numjobs, '--size=%d' % size,
                '--norandommap', '--randrepeat=0', '--time_based',
                '--runtime=%d' % seconds, '--group_reporting']

    def randread_once(self, uri, size):
        """Each 4 KiB block of [0, size) read exactly once, randomly."""
        a = self.args
        per = size // a.numjobs
        return ['--name=coldread'] + self.target(uri) + [
                '--rw=randread', '--bs=4k', '--iodepth=%d' % a.iodepth,
                '--numjobs=%d' % a.numjobs, '--size=%d' % per,
                '--offset_increment=%d' % per, '--randrepeat=0',
                '--group_reporting']

    def seqread(self, uri, size, bs=FILL_BS):
        return ['--name=fill'] + self.target(uri) + [
                '--rw=read', '--bs=%d' % bs, '--iodepth=8',
                '--size=%d' % size]

    # -- plumbing -----------------------------------------------------------

    def setup(self):
        a = self.args
        self.origin = os.path.join(self.work, 'origin.img')
        with open(self.origin, 'wb') as f:
            f.truncate(max(2 * L.GiB, 2 * a.region_b))
        print('preparing: %d MiB of data in %s'
              % (a.region_b // L.MiB, self.origin), flush=True)
        L.fill(self.lab, self.origin, 0, a.region_b)
        self.origin_proc, self.origin_uri = self.lab.nbdkit(
            'origin', ['file', self.origin], threads=a.nbdkit_threads)
        self.agent_keys = dict(L.FIO_AGENT_KEYS)
        # The file-path origin of the cold-miss runs lives here.
        self.agent_keys['origin_prefixes'] = self.work + '/'
        if a.nbd_threads:
            self.agent_keys['nbd_threads'] = a.nbd_threads
        if a.origin_connections:
            self.agent_keys['origin_connections'] = a.origin_connections
        self.agent = self.lab.agent('agent', a.region_b, **self.agent_keys)
        self.rss_started = self.agent.proc.rss_bytes()
        self.client = self.agent.client

    def server_cpu(self, proxy=False):
        """CPU seconds used so far by the servers of a request.

        The agent (or with proxy, nbdkit's NBD proxy) and the origin nbdkit.
        """
        front = self.proxy_proc if proxy else self.agent.proc
        return front.cpu_seconds() + self.origin_proc.cpu_seconds()

    def origin_sock(self):
        """The unix socket of the origin nbdkit, from its URI."""
        return self.origin_uri.split('socket=', 1)[1]

    def show(self, vid, agent=None):
        agent = agent or self.agent
        try:
            return agent.client.show_volume(vid)
        except Exception as exc:
            raise self.lab.agent_error(agent, 'volume-show %s: %s'
                                       % (vid, exc))

    def attach(self, vid, origin, size, agent=None, quiet=False,
               policy='read_only'):
        agent = agent or self.agent
        try:
            att = agent.client.attach_volume(vid, origin, cache_size=size,
                                             write_policy=policy,
                                             admission='all')
        except Exception as exc:
            raise self.lab.agent_error(agent, 'volume-attach %s: %s'
                                       % (vid, exc))
        if not quiet:
            self.lab.note('attach %s' % vid,
                          "fcache --socket %s volume-attach %s --origin "
                          "'%s' --cache-size %d --write-policy %s"
                          % (agent.conf['control_socket'], vid, origin,
                             size, policy))
        return att

    def fio(self, what, argv, quiet=True, agent=None, ceph_conf=None):
        """Run fio; on failure, show the log of the agent it went through.

        ceph_conf: the CEPH_CONF of fio's rbd engine.
        """
        old = os.environ.get('CEPH_CONF')
        if ceph_conf:
            if not quiet:
                self.lab.note(what, 'CEPH_CONF=%s %s' % (
                    ceph_conf, L.cmdline(
                        ['fio', '--output-format=json'] + argv)))
                quiet = True
            os.environ['CEPH_CONF'] = ceph_conf
        try:
            return L.fio_totals(self.lab.fio(what, argv, quiet=quiet))
        except L.LabError as exc:
            if agent is None:
                raise
            msg = str(exc)
            if len(msg) > 3000:
                msg = msg[:1500] + '\n...\n' + msg[-1500:]
            raise self.lab.agent_error(agent, msg)
        finally:
            if ceph_conf:
                if old is None:
                    del os.environ['CEPH_CONF']
                else:
                    os.environ['CEPH_CONF'] = old

    def fill_volume(self, agent, vid, size, origin=None):
        """Attach vid to agent and read all of it once.

        origin: the volume's origin (default: the nbdkit file server).
        Returns (attach result, agent RSS with the volume empty, agent RSS
        with it fully cached, volume-show when full).
        """
        att = self.attach(vid, origin or self.origin_uri, size, agent=agent)
        uri = att['export_uri']
        # One read of the same size first, so that the per-connection
        # worker threads, their request buffers (sized by the largest
        # request) and the allocator's per-thread arenas exist before the
        # RSS baseline: the growth is then the cache's own.
        self.fio('touch', self.seqread(uri, FILL_BS), agent=agent)
        rss_empty = agent.proc.rss_bytes()
        self.fio('fill %s' % vid, self.seqread(uri, size), quiet=False,
                 agent=agent)
        rss_full = agent.proc.rss_bytes()
        show = self.show(vid, agent)
        want = size // show['block_size']
        if show['cached_blocks'] != want:
            raise self.lab.agent_error(
                agent, 'after reading the whole of volume %s, %d of %d '
                'blocks are cached' % (vid, show['cached_blocks'], want))
        return att, rss_empty, rss_full, show

    def ensure_hot(self):
        """Attach the hot volume and read all of it once (fully cached)."""
        if self.hot:
            return
        a = self.args
        att, self.rss_empty, self.rss_full, show = self.fill_volume(
            self.agent, HOT_ID, a.region_b)
        self.hot_show = show
        self.fio('check hits',
                 self.randread_timed(att['export_uri'], a.region_b, 2),
                 agent=self.agent)
        h, m = delta_hits(show, self.show(HOT_ID))
        if not h or m > h * 0.001:
            raise self.lab.agent_error(
                self.agent, 'hot volume not fully cached: %d hits, %d '
                'misses' % (h, m))
        print('hot volume: %d blocks cached, hit ratio %.4f on a check run'
              % (show['cached_blocks'], h / (h + m)), flush=True)
        self.hot = att

    # -- sections -----------------------------------------------------------

    def memory(self):
        a = self.args
        self.ensure_hot()
        st = self.client.status()
        show = self.hot_show
        bs = st['block_size']
        cap = st['capacity_bytes'] // bs
        cached = show['cached_blocks']
        meta = os.path.join(self.agent.state_dir, 'cache.meta')
        meta_size = os.path.getsize(meta)
        # The agent allocates and initialises its block table for the whole
        # cache at start, so its RSS barely moves while a volume fills.
        # The marginal cost of a cached block is therefore also measured
        # across two agents that differ only in cache size, each with a
        # fully cached volume.
        small_size = max(a.region_b // 8, 16 * L.MiB)
        small = self.lab.agent('agent-small', small_size, **self.agent_keys)
        _, _, small_full, small_show = self.fill_volume(
            small, 'bench-small', small_size)
        self.lab.stop(small.proc)
        d_blocks = cached - small_show['cached_blocks']
        table = st['table_memory_bytes']
        res = {
            'block_size': bs,
            'capacity_blocks': cap,
            'cached_blocks': cached,
            'table_memory_bytes': table,
            'table_bytes_per_capacity_block': table / cap,
            'volume_memory_bytes': show['memory_bytes'],
            'volume_bytes_per_cached_block': show['memory_bytes'] / cached,
            'accounted_bytes_per_cached_block':
                table / cap + show['memory_bytes'] / cached,
            'rss_started_bytes': self.rss_started,
            'rss_empty_bytes': self.rss_empty,
            'rss_full_bytes': self.rss_full,
            'rss_growth_bytes': self.rss_full - self.rss_empty,
            'rss_growth_per_cached_block':
                (self.rss_full - self.rss_empty) / cached,
            'small_agent_cache_bytes': small_size,
            'small_agent_cached_blocks': small_show['cached_blocks'],
            'small_agent_rss_full_bytes': small_full,
            'rss_two_agents_delta_bytes': self.rss_full - small_full,
            'rss_two_agents_per_cached_block':
                (self.rss_full - small_full) / d_blocks,
            'meta_file_bytes': meta_size,
            'meta_allocated_bytes': os.stat(meta).st_blocks * 512,
            'meta_bytes_per_capacity_block': (meta_size - 4096) / cap,
        }
        self.out['memory'] = res

    def hit(self):
        a = self.args
        self.ensure_hot()
        agent_uri = self.hot['export_uri']
        cache_path = self.agent.conf['cache_path']
        file_proc, file_uri = self.lab.nbdkit(
            'nbdkit-cachefile', ['file', cache_path], readonly=True,
            threads=a.nbdkit_threads)
        tmp = os.path.join(self.work, 'nbdkit-cache-tmp')
        os.makedirs(tmp, exist_ok=True)
        filt_proc, filt_uri = self.lab.nbdkit(
            'nbdkit-cachefilter', ['file', self.origin, 'cache-on-read=true'],
            filters=['cache'], threads=a.nbdkit_threads,
            env={'TMPDIR': tmp})
        self.fio('fill nbdkit cache filter',
                 self.seqread(filt_uri, a.region_b), quiet=False)
        peers = [('agent', agent_uri, self.agent.proc),
                 ('nbdkit-file', file_uri, file_proc),
                 ('nbdkit-cache-filter', filt_uri, filt_proc)]
        runs = []
        for i in range(a.runs):
            order = peers if i % 2 == 0 else list(reversed(peers))
            run = {}
            for name, uri, proc in order:
                is_agent = name == 'agent'
                before = self.show(HOT_ID) if is_agent else None
                cpu0 = proc.cpu_seconds()
                t = self.fio('hit %s' % name,
                             self.randread_timed(uri, a.region_b, a.seconds),
                             quiet=i > 0,
                             agent=self.agent if is_agent else None)
                cpu = proc.cpu_seconds() - cpu0
                run[name] = {'iops': t['read_iops'],
                             'lat_us': t['read_lat_us'],
                             'server_cpu_us_per_io': server_us(cpu, t)}
                if is_agent:
                    h, m = delta_hits(before, self.show(HOT_ID))
                    run[name]['hit_ratio'] = h / (h + m) if h + m else None
                print('  hit run %d: %-20s %9.0f IOPS'
                      % (i + 1, name, t['read_iops']), flush=True)
            agent_iops = run['agent']['iops']
            run['ratio_agent_nbdkit_file'] = (
                agent_iops / run['nbdkit-file']['iops'])
            run['ratio_agent_nbdkit_cache_filter'] = (
                agent_iops / run['nbdkit-cache-filter']['iops'])
            runs.append(run)
        med = {}
        for name, _, _ in peers:
            med[name] = median([r[name]['iops'] for r in runs])
            med[name + '_cpu_us'] = median(
                [r[name]['server_cpu_us_per_io'] for r in runs])
        for k in ('ratio_agent_nbdkit_file',
                  'ratio_agent_nbdkit_cache_filter'):
            med[k] = median([r[k] for r in runs])
        self.out['hit'] = {
            'runs': runs, 'median': med,
            'min_hit_ratio': min(r['agent']['hit_ratio'] for r in runs)}

    def miss(self):
        a = self.args
        if self.hot:
            # Give the whole cache to the cold volumes.
            self.client.detach_volume(HOT_ID)
            self.hot = None
        peers = ['agent', 'agent-origin-path', 'nbdkit-origin',
                 'nbdkit-proxy']
        if not getattr(self, 'proxy_uri', None):
            # One backend connection per client connection, as the agent's
            # origin_connections does for its four fio jobs.
            self.proxy_proc, self.proxy_uri = self.lab.nbdkit(
                'proxy', ['nbd', 'socket=%s' % self.origin_sock()],
                threads=a.nbdkit_threads)
        runs = []
        for i in range(a.runs):
            order = peers if i % 2 == 0 else list(reversed(peers))
            run = {}
            for name in order:
                if name in ('nbdkit-origin', 'nbdkit-proxy'):
                    proxy = name == 'nbdkit-proxy'
                    cpu0 = self.server_cpu(proxy=proxy)
                    t = self.fio('miss %s' % name.replace('-', ' '),
                                 self.randread_once(
                                     self.proxy_uri if proxy
                                     else self.origin_uri, a.region_b),
                                 quiet=i > 0)
                    cpu = self.server_cpu(proxy=proxy) - cpu0
                    run[name] = {'iops': t['read_iops'],
                                 'lat_us': t['read_lat_us']}
                else:
                    vid = 'bench-cold-%d-%s' % (i, name)
                    origin = (self.origin_uri if name == 'agent'
                              else self.origin)
                    att = self.attach(vid, origin, a.region_b,
                                      quiet=i > 0)
                    before = self.show(vid)
                    cpu0 = self.server_cpu()
                    t = self.fio('miss %s' % name,
                                 self.randread_once(att['export_uri'],
                                                    a.region_b),
                                 quiet=i > 0, agent=self.agent)
                    cpu = self.server_cpu() - cpu0
                    after = self.show(vid)
                    h, m = delta_hits(before, after)
                    run[name] = {'iops': t['read_iops'],
                                 'lat_us': t['read_lat_us'],
                                 'misses': m, 'hits': h,
                                 'origin_read_bytes':
                                     after['origin_read_bytes'],
                                 'cached_blocks': after['cached_blocks']}
                    self.client.detach_volume(vid)
                run[name]['server_cpu_us_per_io'] = server_us(cpu, t)
                print('  miss run %d: %-20s %9.0f IOPS'
                      % (i + 1, name, t['read_iops']), flush=True)
            base = run['nbdkit-origin']['iops']
            run['ratio_agent_nbdkit'] = run['agent']['iops'] / base
            run['ratio_agent_path_nbdkit'] = (
                run['agent-origin-path']['iops'] / base)
            run['ratio_proxy_nbdkit'] = run['nbdkit-proxy']['iops'] / base
            run['ratio_agent_proxy'] = (run['agent']['iops']
                                        / run['nbdkit-proxy']['iops'])
            runs.append(run)
        med = {}
        for name in peers:
            med[name] = median([r[name]['iops'] for r in runs])
            med[name + '_cpu_us'] = median(
                [r[name]['server_cpu_us_per_io'] for r in runs])
        for k in ('ratio_agent_nbdkit', 'ratio_agent_path_nbdkit',
                  'ratio_proxy_nbdkit', 'ratio_agent_proxy'):
            med[k] = median([r[k] for r in runs])
        self.out['miss'] = {
            'runs': runs, 'median': med,
            'max_hits': max(max(r['agent']['hits'],
                                r['agent-origin-path']['hits'])
                            for r in runs)}

    def write(self):
        a = self.args
        if self.hot:
            self.client.detach_volume(HOT_ID)
            self.hot = None
        vid = 'bench-write'
        att = self.attach(vid, self.origin_uri, a.region_b,
                          policy='write_through')
        peers = ['agent', 'nbdkit-origin']
        runs = []
        for i in range(a.runs):
            order = peers if i % 2 == 0 else list(reversed(peers))
            run = {}
            for name in order:
                is_agent = name == 'agent'
                uri = att['export_uri'] if is_agent else self.origin_uri
                cpu0 = self.server_cpu()
                t = self.fio('write %s' % name.replace('-', ' '),
                             self.randread_timed(uri, a.region_b,
                                                 a.seconds, rw='randwrite'),
                             quiet=i > 0,
                             agent=self.agent if is_agent else None)
                cpu = self.server_cpu() - cpu0
                run[name] = {'iops': t['write_iops']}
                if is_agent:
                    run[name]['agent_cpu_us_per_io'] = server_us(cpu, t)
                print('  write run %d: %-20s %9.0f IOPS'
                      % (i + 1, name, t['write_iops']), flush=True)
            run['ratio_agent_nbdkit'] = (run['agent']['iops']
                                         / run['nbdkit-origin']['iops'])
            runs.append(run)
        self.client.detach_volume(vid)
        med = {name: median([r[name]['iops'] for r in runs])
               for name in peers}
        med['agent_cpu_us'] = median(
            [r['agent']['agent_cpu_us_per_io'] for r in runs])
        med['ratio_agent_nbdkit'] = median(
            [r['ratio_agent_nbdkit'] for r in runs])
        self.out['write'] = {'runs': runs, 'median': med}

    def rbd(self):
        """An RBD image: the agent's hits and misses against fio's librbd."""
        box = ceph_box.CephBox(self.lab, os.path.join(self.work, 'ceph'))
        agents = []
        try:
            self.rbd_runs(box, agents)
        finally:
            # The agents close their images before the cluster goes.
            for agent in agents:
                self.lab.stop(agent.proc)
            box.stop()

    def rbd_runs(self, box, agents):
        a = self.args
        size = a.rbd_region_b
        image = 'bench'
        peer = ('rbd', image)
        print('starting a ceph box in %s' % box.dir, flush=True)
        box.start()
        box.rbd('create image', 'create', '--size', '%dM' % (size // L.MiB),
                '%s/%s' % (ceph_box.POOL, image))
        # fio's rbd engine as librbd is by default (ms_client_mode "crc
        # secure": crc to the OSD; rbd_cache on, policy writearound, which
        # caches no reads), and with the agent's secure messenger mode.
        confs = {'secure': box.client_conf('fio-rbd-secure',
                                           ms_client_mode='secure',
                                           ms_mon_client_mode='secure'),
                 'crc': box.client_conf('fio-rbd-crc')}
        print('preparing: %d MiB of data in image %s/%s'
              % (size // L.MiB, ceph_box.POOL, image), flush=True)
        self.fio('fill rbd image',
                 ['--name=prefill'] + self.target(peer) +
                 ['--rw=write', '--bs=4M', '--iodepth=4', '--size=%d' % size,
                  '--refill_buffers=1'],
                 quiet=False, ceph_conf=confs['crc'])
        modes = {}
        for mode, conf in sorted(confs.items()):
            modes[mode] = box.check_modes(
                conf, ['--name=check'] + self.target(peer) +
                ['--rw=randread', '--bs=4k', '--size=%d' % size,
                 '--number_ios=64'])
            if modes[mode].get('osd') != [mode]:
                raise L.LabError('fio-rbd-%s: the OSD connections used %s'
                                 % (mode, modes[mode]))
        print('fio rbd engine, messenger modes seen: %s'
              % mode_text(modes), flush=True)
        keys = dict(L.FIO_AGENT_KEYS)
        keys['origin_rbd_dirs'] = box.dir + '/'
        if a.nbd_threads:
            keys['nbd_threads'] = a.nbd_threads
        if a.origin_connections:
            keys['origin_connections'] = a.origin_connections
        ags = {}
        for mode in ('secure', 'crc'):
            ags[mode] = self.lab.agent('agent-rbd-%s' % mode, size,
                                       origin_rbd_ms_mode=mode, **keys)
            agents.append(ags[mode])
        origin = box.agent_uri(image)
        res = {'image_bytes': size, 'image': '%s/%s' % (ceph_box.POOL, image),
               'ceph': L._version(['ceph', '--version']),
               'peer_modes': modes, 'agent_origin': origin}

        # Hits: the whole image cached in the secure agent.
        agent = ags['secure']
        vid = 'rbd-hot'
        att, _, _, show = self.fill_volume(agent, vid, size, origin=origin)
        uri = att['export_uri']
        self.fio('check rbd hits', self.randread_timed(uri, size, 2),
                 agent=agent)
        h, m = delta_hits(show, self.show(vid, agent))
        if not h or m > h * 0.001:
            raise self.lab.agent_error(
                agent, 'rbd volume not fully cached: %d hits, %d misses'
                % (h, m))
        peers = [('agent', uri, agent, None),
                 ('fio-rbd-secure', peer, None, confs['secure']),
                 ('fio-rbd-crc', peer, None, confs['crc'])]
        runs = []
        for i in range(a.runs):
            order = peers if i % 2 == 0 else list(reversed(peers))
            run = {}
            for name, target, ag, conf in order:
                before = self.show(vid, ag) if ag else None
                t = self.fio('rbd hit %s' % name,
                             self.randread_timed(target, size, a.seconds),
                             quiet=i > 0, agent=ag, ceph_conf=conf)
                run[name] = {'iops': t['read_iops'],
                             'lat_us': t['read_lat_us']}
                if ag:
                    h, m = delta_hits(before, self.show(vid, ag))
                    run[name]['hit_ratio'] = h / (h + m) if h + m else None
                print('  rbd hit run %d: %-16s %9.0f IOPS'
                      % (i + 1, name, t['read_iops']), flush=True)
            run['ratios'] = ratios(run, RBD_HIT_RATIOS)
            runs.append(run)
        agent.client.detach_volume(vid)
        res['hit'] = summary(runs, [p[0] for p in peers], RBD_HIT_RATIOS)
        res['hit']['min_hit_ratio'] = min(r['agent']['hit_ratio']
                                          for r in runs)

        # Misses: a fresh volume per run, each block read once.
        names = ['agent-secure', 'agent-crc', 'fio-rbd-secure', 'fio-rbd-crc']
        runs = []
        for i in range(a.runs):
            order = names if i % 2 == 0 else list(reversed(names))
            run = {}
            for name in order:
                mode = name.rsplit('-', 1)[1]
                if name.startswith('fio'):
                    t = self.fio('rbd miss %s' % name,
                                 self.randread_once(peer, size),
                                 quiet=i > 0, ceph_conf=confs[mode])
                    run[name] = {'iops': t['read_iops'],
                                 'lat_us': t['read_lat_us']}
                else:
                    ag = ags[mode]
                    vid = 'rbd-cold-%d' % i
                    att = self.attach(vid, origin, size, agent=ag,
                                      quiet=i > 0)
                    before = self.show(vid, ag)
                    t = self.fio('rbd miss %s' % name,
                                 self.randread_once(att['export_uri'], size),
                                 quiet=i > 0, agent=ag)
                    after = self.show(vid, ag)
                    h, m = delta_hits(before, after)
                    run[name] = {'iops': t['read_iops'],
                                 'lat_us': t['read_lat_us'],
                                 'misses': m, 'hits': h,
                                 'origin_read_bytes':
                                     after['origin_read_bytes']}
                    ag.client.detach_volume(vid)
                print('  rbd miss run %d: %-16s %9.0f IOPS'
                      % (i + 1, name, t['read_iops']), flush=True)
            run['ratios'] = ratios(run, RBD_MISS_RATIOS)
            runs.append(run)
        res['miss'] = summary(runs, names, RBD_MISS_RATIOS)
        res['miss']['max_hits'] = max(max(r['agent-secure']['hits'],
                                          r['agent-crc']['hits'])
                                      for r in runs)
        self.out['rbd'] = res


def table(rows):
    widths = [max(len(str(x)) for x in col) for col in zip(*rows)]
    fmt = '  '.join('%%%ds' % w if i else '%%-%ds' % w
                    for i, w in enumerate(widths))
    lines = [fmt % tuple(rows[0]), '  '.join('-' * w for w in widths)]
    lines += [fmt % tuple(r) for r in rows[1:]]
    return '\n'.join(lines)


def mode_text(modes):
    """{'crc': {'mon': ['secure'], 'osd': ['crc']}} -> readable text."""
    return '; '.join('fio-rbd-%s: %s' % (k, ', '.join(
        '%s %s' % (e, '/'.join(m)) for e, m in sorted(v.items())))
        for k, v in sorted(modes.items()))


def rbd_report(r, a):
    """The rbd section's lines: IOPS, then ratios, medians and per run."""
    def per(part, name):
        return ' '.join('%.0f' % run[name]['iops']
                        for run in r[part]['runs'])

    def per_ratio(part, name):
        return ' '.join('%.3f' % run['ratios'][name]
                        for run in r[part]['runs'])

    lines = ['rbd: image %s of %d MiB in a ceph box (1 mon, 1 OSD, '
             'loopback, msgr2 only; %s); 4 KiB random reads, %d job(s) x '
             'iodepth %d' % (r['image'], r['image_bytes'] // L.MiB,
                             r['ceph'].split(' (')[0], a.numjobs,
                             a.iodepth),
             'peer: fio --ioengine=rbd (librbd; rbd_cache on, policy '
             'writearound: reads not cached); messenger modes seen: %s'
             % mode_text(r['peer_modes'])]
    rows = [('path', 'IOPS (median)', 'per run')]
    for part, names, title in (
            ('hit', ('agent', 'fio-rbd-secure', 'fio-rbd-crc'),
             'hit, fully cached, %d s per run' % a.seconds),
            ('miss', ('agent-secure', 'agent-crc', 'fio-rbd-secure',
                      'fio-rbd-crc'),
             'miss, each block read once, fresh volume each run')):
        rows.append(('%s:' % title, '', ''))
        for name in names:
            rows.append(('  ' + name, '%.0f' % r[part]['median'][name],
                         per(part, name)))
    lines.append(table(rows))
    rows = [('ratio (IOPS, same run)', 'median', 'per run')]
    for part, which in (('hit', RBD_HIT_RATIOS), ('miss', RBD_MISS_RATIOS)):
        for name, _, _ in which:
            rows.append(('%s %s' % (part, name),
                         '%.3f' % r[part]['median']['ratios'][name],
                         per_ratio(part, name)))
    lines.append(table(rows))
    lines.append('agent hit ratio during the hit runs: >= %.4f; hits during '
                 'the cold runs: %d (expected 0)'
                 % (r['hit']['min_hit_ratio'], r['miss']['max_hits']))
    return lines


def report(out, args):
    a = args
    m = out['machine']
    b = out.get('agent_build', {})
    lines = [
        'machine: %s CPU(s), %s, %.1f GiB RAM, Linux %s; %s, nbdkit %s'
        % (m['nproc'], m['cpu_model'], m['mem_bytes'] / L.GiB, m['kernel'],
           m['fio'], m['nbdkit'].replace('nbdkit ', '')),
        'load average at start %s, at end %s (other work on the machine '
        'makes the figures noisy)'
        % ('/'.join('%.1f' % x for x in out['loadavg_start']),
           '/'.join('%.1f' % x for x in out.get('loadavg_end', ()))),
        'agent: %s (sha256 %s, HEAD %s + %s changed file(s) under '
        'fcache_agent/)'
        % (b.get('binary'), b.get('sha256', '?')[:12], b.get('git_head', '?'),
           b.get('agent_tree_changes', '?')),
        'runs: %d (medians), fio nbd engine, 4 KiB random reads, %d job(s) '
        'x iodepth %d, region %d MiB'
        % (a.runs, a.numjobs, a.iodepth,
           (a.region_b if [s for s in a.only if s != 'rbd']
            else a.rbd_region_b) // L.MiB),
    ]

    def per(section, key):
        return ' '.join('%.0f' % r[key]['iops'] for r in out[section]['runs'])

    if 'hit' in out:
        h = out['hit']['median']
        lines += ['', 'hit: fully cached 4 KiB random reads, %d s per run'
                  % a.seconds]
        rows = [('server', 'IOPS (median)', 'per run', 'agent / peer',
                 'server CPU us/IO'),
                ('fcache-agent export', '%.0f' % h['agent'],
                 per('hit', 'agent'), '', '%.1f' % h['agent_cpu_us']),
                ('nbdkit file (agent cache file)', '%.0f' % h['nbdkit-file'],
                 per('hit', 'nbdkit-file'),
                 '%.3f' % h['ratio_agent_nbdkit_file'],
                 '%.1f' % h['nbdkit-file_cpu_us']),
                ('nbdkit cache filter (warm)',
                 '%.0f' % h['nbdkit-cache-filter'],
                 per('hit', 'nbdkit-cache-filter'),
                 '%.3f' % h['ratio_agent_nbdkit_cache_filter'],
                 '%.1f' % h['nbdkit-cache-filter_cpu_us'])]
        lines.append(table(rows))
        verdict = h['ratio_agent_nbdkit_file']
        lines += [
            'agent hit ratio during the runs: >= %.4f'
            % out['hit']['min_hit_ratio'],
            'server CPU per request, agent / nbdkit file: %.3f (less '
            'sensitive to other load on the machine)'
            % (h['agent_cpu_us'] / h['nbdkit-file_cpu_us']),
            'agent / nbdkit file = %.3f (target >= 0.9): %s'
            % (verdict, 'MET' if verdict >= 0.9 else 'NOT MET')]
    if 'miss' in out:
        h = out['miss']['median']
        lines += ['', 'miss: 4 KiB random reads, each block of the region '
                  'read once, never read before (fresh volume each run)']
        rows = [('path', 'IOPS (median)', 'per run', 'vs nbdkit',
                 'server CPU us/IO'),
                ('agent, origin = nbdkit URI', '%.0f' % h['agent'],
                 per('miss', 'agent'), '%.3f' % h['ratio_agent_nbdkit'],
                 '%.1f' % h['agent_cpu_us']),
                ('agent, origin = file path', '%.0f' % h['agent-origin-path'],
                 per('miss', 'agent-origin-path'),
                 '%.3f' % h['ratio_agent_path_nbdkit'],
                 '%.1f' % h['agent-origin-path_cpu_us']),
                ('nbdkit file (origin), no cache',
                 '%.0f' % h['nbdkit-origin'], per('miss', 'nbdkit-origin'),
                 '', '%.1f' % h['nbdkit-origin_cpu_us']),
                ('nbdkit nbd plugin (proxy to the origin, no cache)',
                 '%.0f' % h['nbdkit-proxy'], per('miss', 'nbdkit-proxy'),
                 '%.3f' % h['ratio_proxy_nbdkit'],
                 '%.1f' % h['nbdkit-proxy_cpu_us'])]
        lines.append(table(rows))
        lines.append('(server CPU: agent or proxy + origin nbdkit.)  Agent '
                     '/ proxy: %.3f.  Hits during the cold runs: %d '
                     '(expected 0)' % (h['ratio_agent_proxy'],
                                       out['miss']['max_hits']))
    if 'write' in out:
        w = out['write']['median']
        lines += ['', 'write: 4 KiB random writes over the region, '
                  'write_through (cache and origin)']
        rows = [('path', 'IOPS (median)', 'per run', 'vs nbdkit'),
                ('agent, origin = nbdkit URI', '%.0f' % w['agent'],
                 per('write', 'agent'), '%.3f' % w['ratio_agent_nbdkit']),
                ('nbdkit file (origin), no cache',
                 '%.0f' % w['nbdkit-origin'], per('write', 'nbdkit-origin'),
                 '')]
        lines.append(table(rows))
        lines.append('agent + origin CPU per write: %.1f us'
                     % w['agent_cpu_us'])
    if 'rbd' in out:
        lines += [''] + rbd_report(out['rbd'], a)
    if 'memory' in out:
        mm = out['memory']
        lines += ['', 'memory: %d-byte blocks, capacity %d blocks, %d cached'
                  % (mm['block_size'], mm['capacity_blocks'],
                     mm['cached_blocks'])]
        rows = [('figure', 'bytes', 'per block'),
                ('agent table (table_memory_bytes) / capacity block',
                 mm['table_memory_bytes'],
                 '%.1f' % mm['table_bytes_per_capacity_block']),
                ('volume map (memory_bytes) / cached block',
                 mm['volume_memory_bytes'],
                 '%.1f' % mm['volume_bytes_per_cached_block']),
                ('accounted total / cached block', '',
                 '%.1f' % mm['accounted_bytes_per_cached_block']),
                ('agent RSS growth, volume empty -> full / cached block',
                 mm['rss_growth_bytes'],
                 '%.1f' % mm['rss_growth_per_cached_block']),
                ('RSS, agent %d MiB - agent %d MiB, both full / block'
                 % (mm['capacity_blocks'] * mm['block_size'] // L.MiB,
                    mm['small_agent_cache_bytes'] // L.MiB),
                 mm['rss_two_agents_delta_bytes'],
                 '%.1f' % mm['rss_two_agents_per_cached_block']),
                ('cache.meta minus 4096 header / capacity block',
                 mm['meta_file_bytes'] - 4096,
                 '%.1f' % mm['meta_bytes_per_capacity_block'])]
        lines.append(table(rows))
    return '\n'.join(lines)


def main(argv):
    args = parse_args(argv)
    work = os.path.abspath(args.workdir or tempfile.mkdtemp(
        prefix='fcache-bench-', dir='/var/tmp'))
    stamp = time.strftime('%Y%m%d-%H%M%S')
    out = {'date': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
           'command': L.invocation('bench/run.sh', argv),
           'machine': L.machine(),
           'agent_build': L.agent_build(),
           'loadavg_start': os.getloadavg(),
           'config': {'runs': args.runs, 'seconds': args.seconds,
                      'region_bytes': args.region_b,
                      'rbd_region_bytes': args.rbd_region_b,
                      'numjobs': args.numjobs, 'iodepth': args.iodepth,
                      'nbd_threads': args.nbd_threads,
                      'origin_connections': args.origin_connections,
                      'nbdkit_threads': args.nbdkit_threads,
                      'sections': args.only}}
    print('fcache benchmarks: %s; scratch %s' % (', '.join(args.only), work),
          flush=True)
    try:
        with L.Lab(work, verbose=args.verbose) as lab:
            b = Bench(lab, args)
            if [s for s in args.only if s != 'rbd']:
                b.setup()
            for s in SECTIONS:
                if s in args.only:
                    print('== %s' % s, flush=True)
                    getattr(b, s)()
            out.update(b.out)
            out['loadavg_end'] = os.getloadavg()
            out['agent_config'] = b.agent.conf if b.agent else None
            out['commands'] = lab.commands
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    text = report(out, args)
    print()
    print(text)
    print()
    print('commands (%s is the scratch directory):' % work)
    seen = set()
    for what, line in out['commands']:
        if line not in seen:
            seen.add(line)
            print('  %-26s %s' % (what + ':', line))
    os.makedirs(args.results_dir, exist_ok=True)
    path = os.path.join(args.results_dir, 'bench-%s.json' % stamp)
    out['report'] = text
    with open(path, 'w') as f:
        json.dump(out, f, indent=1)
    print('\nresults: %s' % path)
    return 0


if __name__ == '__main__':
    sys.exit(L.run_main(main, sys.argv[1:], 'benchmark'))
