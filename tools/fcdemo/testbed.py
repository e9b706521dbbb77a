# SPDX-License-Identifier: Apache-2.0
"""The testbed: shared storage, two hosts, neighbour VMs, on one machine.

The shape of the FirepanIF evaluation (seed firepanif-cache-warmup, 4.1),
scaled to a 2-core machine:

* shared storage: one ``nbdkit file dir=DIR`` server whose ``rate`` filter
  caps the bandwidth of all clients together (reads and writes separately)
  and whose ``delay`` filter adds a latency to every request, so that it
  is the bottleneck every VM shares, as the paper's NVMe-over-10GbE server
  is.  Each VM disk is a sparse file in DIR, i.e. an export name;
* two hosts: an fcache-agent each (``host-a`` the source, ``host-b`` the
  destination), with their own cache file;
* neighbour VMs on both hosts: vmload on a warm cached volume of their
  host's agent, running during the whole experiment;
* the migration link: the agents' per-migration ``rate_limit``, which
  covers background and on-demand blocks together (doc/research/testbed.rst
  says why this rather than a tc-shaped veth pair).

Sizes follow the paper's proportions: a VM disk is 2.5x the working set
(50 GB for 20 GB of data) and the paper's cache is half the working set
(10 GB, i.e. 20 % of the disk).
"""

import os
import time

from fcdemo import lab as L
from fcdemo import vm as V

HOSTS = ('host-a', 'host-b')


def parse_rate(text):
    """Bits per second in nbdkit's rate= syntax (nbdkit_parse_size)."""
    t = str(text).strip()
    mult = {'k': 2 ** 10, 'K': 2 ** 10, 'M': 2 ** 20, 'G': 2 ** 30}.get(t[-1:])
    return float(t[:-1]) * mult if mult else float(t)


class Config(object):
    """Every knob of a testbed run, with the presets of tools/testbed.py."""

    # (attribute, default) -- sizes in bytes, times in seconds.
    DEFAULTS = dict(
        job_size=8 * L.MiB,         # vmload --size: one of the 4 jobs' area
        cache_sizes=(8 * L.MiB, 16 * L.MiB, 32 * L.MiB),
        storage_rate='32M',         # bit/s, nbdkit rate filter
        storage_delay_ms=0.5,       # nbdkit delay filter, per request
        link_mbps=20.0,             # migration rate limit, MB/s
        neighbours=1,               # per host
        neighbour_iodepth=8,
        nocache_s=3.0, warm_s=12.0, pre_s=4.0, first_s=6.0, total_s=12.0,
        neighbour_warm_s=5.0,
        strategies=('none', 'cachemior', 'firepan', 'firepan_if',
                    'cloudcache', 'hybrid', 'auto'),
        runs=1, seed=1, write_policy='read_only')

    def __init__(self, **kw):
        for k, v in self.DEFAULTS.items():
            setattr(self, k, kw.pop(k, v))
        if kw:
            raise TypeError('unknown testbed settings: %s' % ', '.join(kw))

    @property
    def working_set(self):
        return 4 * self.job_size

    @property
    def disk_size(self):
        return (self.working_set * 5 // 2 + L.MiB - 1) // L.MiB * L.MiB

    @property
    def neighbour_cache(self):
        return self.working_set // 2

    @property
    def storage_bytes_per_s(self):
        return parse_rate(self.storage_rate) / 8.0

    def as_dict(self):
        d = {k: getattr(self, k) for k in self.DEFAULTS}
        d.update(working_set=self.working_set, disk_size=self.disk_size,
                 neighbour_cache=self.neighbour_cache)
        return d


class Testbed(object):
    """Starts the storage server, the agents and the neighbours."""

    def __init__(self, lab, cfg):
        self.lab = lab
        self.cfg = cfg
        self.storage_dir = os.path.join(lab.workdir, 'storage')
        self.storage_sock = os.path.join(lab.workdir, 'storage.sock')
        self.agents = {}
        self.neighbours = {h: [] for h in HOSTS}
        self.flash = None

    def start(self):
        cfg = self.cfg
        os.makedirs(self.storage_dir, exist_ok=True)
        filters, params = ['rate'], ['rate=%s' % cfg.storage_rate]
        if cfg.storage_delay_ms:
            filters.append('delay')
            params += ['delay-read=%gms' % cfg.storage_delay_ms,
                       'delay-write=%gms' % cfg.storage_delay_ms]
        self.storage, _ = self.lab.nbdkit(
            'storage', ['file', 'dir=%s' % self.storage_dir] + params,
            filters=filters, threads=2)
        capacity = (cfg.neighbours * cfg.neighbour_cache +
                    max(cfg.cache_sizes) + 4 * L.MiB)
        for host in HOSTS:
            # 16 origin connections: the agent's NBD origin client carries
            # one request per connection, and the delay filter would
            # otherwise make the agent slower than the VM without cache.
            self.agents[host] = self.lab.agent(
                host, capacity, origin_connections=16, log_level='warning')
        self.flash = self.flash_probe('host-b')
        for host in HOSTS:
            for i in range(cfg.neighbours):
                self.neighbours[host].append(self._neighbour(host, i))
        return self

    # The flash probe's volume: 4 jobs of 512 KiB, in a cache of twice that.
    PROBE_JOB = 512 * L.KiB
    PROBE_S = 3.0

    def flash_probe(self, host, timeout_s=60.0):
        """The read rate one VM gets from the host's cache when all hit.

        The FirepanIF model's ``F_k`` (nova_ext.contention), for the report
        to predict a VM's rate during a copy.  A vmload reads a small
        volume, uniformly and only reads, until its cache holds every
        block, then for ``PROBE_S`` seconds more; the rate and the hit
        ratio of those seconds come from the agent's counters.  Run alone
        on the host, before the neighbours start.
        """
        name = 'flash-probe'
        client = self.agents[host].client
        att = client.attach_volume(name, self.disk(name),
                                   cache_size=8 * self.PROBE_JOB,
                                   write_policy='read_only')
        vm = V.Vm(self.lab, name, att['export_uri'], self.PROBE_JOB,
                  seed=self.cfg.seed,
                  extra=('--rwmix-read', '100', '--zoned', '100/100'))
        try:
            deadline = time.monotonic() + timeout_s
            blocks = 4 * self.PROBE_JOB // 4096
            while client.show_volume(name)['cached_blocks'] < blocks:
                if time.monotonic() > deadline:
                    raise L.LabError('flash probe: %s did not cache its %d '
                                     'blocks in %g s' % (name, blocks,
                                                         timeout_s))
                time.sleep(0.2)
            before, t0 = client.show_volume(name), time.monotonic()
            time.sleep(self.PROBE_S)
            after, t1 = client.show_volume(name), time.monotonic()
            V.check_clean(vm, vm.quit())
        finally:
            if vm.proc.alive():
                self.lab.stop(vm.proc)
        client.detach_volume(name)
        self.remove_disk(name)
        reads = after['reads'] - before['reads']
        hits = after['read_hits'] - before['read_hits']
        return {'host': host, 'seconds': t1 - t0,
                'vm_flash_bps': reads * after['block_size'] / (t1 - t0),
                'hit_ratio': hits / reads if reads else None}

    def disk(self, name):
        """A fresh sparse VM disk; returns its URI on the storage server."""
        path = os.path.join(self.storage_dir, name)
        with open(path, 'wb') as f:
            f.truncate(self.cfg.disk_size)
        return self.disk_uri(name)

    def disk_uri(self, name):
        return 'nbd+unix:///%s?socket=%s' % (name, self.storage_sock)

    def remove_disk(self, name):
        try:
            os.unlink(os.path.join(self.storage_dir, name))
        except FileNotFoundError:
            pass

    def _neighbour(self, host, i):
        cfg = self.cfg
        name = 'nb-%s-%d' % (host, i)
        uri = self.disk(name)
        agent = self.agents[host]
        att = agent.client.attach_volume(
            name, uri, cache_size=cfg.neighbour_cache,
            write_policy=cfg.write_policy)
        return V.Vm(self.lab, name, att['export_uri'], cfg.job_size,
                    iodepth=cfg.neighbour_iodepth,
                    seed=cfg.seed * 1000 + 100 + len(self.neighbours[host]))

    def neighbour_iops(self, host, since, until):
        """Mean IOPS (read+write) of the host's neighbours, summed."""
        total = 0.0
        for nb in self.neighbours[host]:
            s = nb.series(since, until)
            if s:
                total += sum(x['read_iops'] + x['write_iops']
                             for x in s) / len(s)
        return total

    def check(self):
        """Every long-running part is still there."""
        for host, agent in self.agents.items():
            if not agent.proc.alive():
                raise self.lab.agent_error(agent, 'the agent of %s exited'
                                           % host)
        if not self.storage.alive():
            raise L.LabError('the storage server exited:\n%s'
                             % L.tail(self.storage.log))
        for nbs in self.neighbours.values():
            for nb in nbs:
                if not nb.proc.alive():
                    raise V.VmError('neighbour %s exited:\n%s'
                                    % (nb.name, nb.stderr_tail()))

    def stop_neighbours(self):
        """Quit the neighbours; returns their final stats (checked)."""
        out = {}
        for nbs in self.neighbours.values():
            for nb in nbs:
                final = nb.quit()
                V.check_clean(nb, final)
                out[nb.name] = final
        return out
