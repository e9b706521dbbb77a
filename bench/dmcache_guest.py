# SPDX-License-Identifier: Apache-2.0
"""The dmcache benchmark's guest side: runs inside UML (bench/dmcache.py).

Two measurements, each ``--runs`` times, medians printed:

1. Read throughput through dm-cache, fully cached vs the origin.  The
   origin is the ubd disk behind dm-delay (1 ms per request, a remote
   volume's latency; ``origin_raw`` is the bare ubd disk for reference).
   fio, psync, O_DIRECT, queue depth 1: 64 KiB sequential and 4 KiB
   random reads over an 8 MiB working set that smq has promoted.
2. Migration transfer rate, firepan, dmcache vs ucache on the same data:
   the same 8 MiB of the same origin cached in 64 KiB blocks by either
   engine, moved between two agents over TCP on loopback; rate = bytes
   moved / the copy's duration (the VM's pause; for dmcache it includes
   the freeze: suspend, table swap, cache_dump).

Prints ``BENCH key value`` lines and ``RESULT {json}``.
"""

import json
import os
import secrets
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# The guest scenarios' helpers, which import each other from their folder.
sys.path.insert(0, os.path.join(HERE, '..', 'fcache_testkit', 'uml', 'guest'))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402

MiB = 1 << 20
WSET = 8 * MiB
BS = 64 * 1024
ORIGIN = os.environ['DEV_ORIGIN']
out = ad.out


def fio(dev, rw, bs, runtime=2):
    p = subprocess.run(
        ['fio', '--name=b', '--filename=' + dev, '--rw=' + rw, '--bs=' + bs,
         '--size=%d' % WSET, '--direct=1', '--ioengine=psync',
         '--iodepth=1', '--time_based', '--runtime=%d' % runtime,
         '--output-format=json'], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, check=True)
    j = json.loads(p.stdout[p.stdout.index('{'):])
    return j['jobs'][0]['read']['bw_bytes'] / 1e6, j['jobs'][0]['read']['iops']


def read_throughput(runs):
    osz = dmutil.blksize(ORIGIN) // 512
    dmutil.dmsetup("create slow --table '0 %d delay %s 0 1'" % (osz, ORIGIN))
    slow = '/dev/mapper/slow'
    a = ad.Agent('ra', prefix='ra', flash=os.environ['DEV_FLASH_A'],
                 cache_size='32M', extra='migration_listen = 127.0.0.1:7450\n')
    a.start()
    dev = a.ok('volume-attach', volume_id='rv', origin=slow, cache_size='24M',
               write_policy='write_through')['export_uri']
    warm_dm(a, 'rv', dev)
    show = a.ok('volume-show', volume_id='rv')
    res = {}
    for name, path in (('cached', dev), ('origin', slow),
                       ('origin_raw', ORIGIN)):
        for rw, bs in (('read', '64k'), ('randread', '4k')):
            mbs = []
            for _ in range(runs):
                mbs.append(fio(path, rw, bs)[0])
            res['%s_%s_%s_MBps' % (name, rw, bs)] = statistics.median(mbs)
    h0 = show['read_hits']
    after = a.ok('volume-show', volume_id='rv')
    # Hits over all three devices' runs: only the cached runs count.
    res['cached_blocks'] = show['cached_blocks']
    res['cached_runs_hit_ratio'] = round(
        (after['read_hits'] - h0) / max(1, after['reads'] - show['reads']), 4)
    for rw, bs in (('read', '64k'), ('randread', '4k')):
        k = '%s_%s' % (rw, bs)
        res['ratio_cached_vs_origin_' + k] = round(
            res['cached_%s_MBps' % k] / res['origin_%s_MBps' % k], 2)
    a.ok('volume-detach', volume_id='rv')
    a.stop()
    dmutil.dmsetup('remove slow')
    return res


def migrate_firepan(src, dst, vol):
    v = src.ok('volume-show', volume_id=vol)
    mid = 'b-' + secrets.token_hex(4)
    token = secrets.token_hex(32)
    # migration_tls = pinned: each agent pins the other's fingerprint.
    key = src.ok('migration-key', migration_id=mid, volume_id=vol)
    inc = dst.ok('migration-incoming', migration_id=mid, volume_id=vol,
                 token=token, strategy='firepan', origin=v['origin'],
                 cache_size=v['cache_size'], write_policy=v['write_policy'],
                 admission=v.get('admission', 'all'),
                 peer_fingerprint=key.get('fingerprint'))
    src.ok('migration-outgoing', migration_id=mid, volume_id=vol, token=token,
           strategy='firepan', destination=inc['listen'],
           peer_fingerprint=inc.get('fingerprint'))
    st = src.ok('migration-start', migration_id=mid)
    src.ok('migration-switchover', migration_id=mid)
    for _ in range(600):
        d = dst.ok('migration-status', migration_id=mid)
        if d['state'] in ('completed', 'failed'):
            break
        time.sleep(0.05)
    ad.check(d['state'] == 'completed', 'bench migration: %r' % d)
    fin = src.ok('migration-finish', migration_id=mid, timeout_s=60)
    # firepan's downtime is the copy (start) plus the switch message.
    return fin['bytes_done'], st['downtime_s'], fin['blocks_done']


def warm_ucache(agent, vol):
    import nbd
    uri = agent.ok('volume-show', volume_id=vol)['export_uri']
    h = nbd.NBD()
    h.connect_uri(uri)
    for off in range(0, WSET, BS):
        h.pread(BS, off)
    h.shutdown()


def warm_dm(agent, vol, dev):
    """Re-read the working set until smq holds it (or stops promoting)."""
    best, still = 0, 0
    for _ in range(80):
        n = agent.ok('volume-show', volume_id=vol)['cached_blocks']
        if n >= WSET // BS or still >= 10:
            break
        still = still + 1 if n <= best else 0
        best = max(best, n)
        for off in range(0, WSET, BS):
            dmutil.pread(dev, off, BS)
    ad.check(n >= 0.9 * WSET // BS, 'smq promoted only %d of %d blocks' % (
        n, WSET // BS))


def transfer(engine, runs, port):
    cfg = ('migration_listen = 127.0.0.1:%d\n')
    hosts = []
    for i, flash in enumerate(('DEV_FLASH_A', 'DEV_FLASH_B')):
        name = '%s%d' % (engine[:2], i)
        extra = cfg % (port + i)
        a = ad.Agent(name, prefix=name, flash=os.environ[flash],
                     cache_size='32M', extra=extra)
        if engine == 'ucache':
            # The same flash device, as ucache's cache file.
            with open(a.conf) as f:
                text = f.read().replace('engine = dmcache', 'engine = ucache')
            with open(a.conf, 'w') as f:
                f.write(text)
        a.start()
        hosts.append(a)
    vol = 'tv'
    r = hosts[0].ok('volume-attach', volume_id=vol, origin=ORIGIN,
                    cache_size='24M', write_policy='write_through')
    if engine == 'ucache':
        warm_ucache(hosts[0], vol)
    else:
        warm_dm(hosts[0], vol, r['export_uri'])
    rates, sizes, downs = [], [], []
    for i in range(runs):
        src, dst = hosts[i % 2], hosts[(i + 1) % 2]
        nbytes, down, blocks = migrate_firepan(src, dst, vol)
        ad.check(nbytes >= 0.9 * WSET,
                 '%s moved only %d bytes' % (engine, nbytes))
        rates.append(nbytes / down / 1e6)
        sizes.append(nbytes)
        downs.append(down)
    hosts[runs % 2].ok('volume-detach', volume_id=vol)
    for h in hosts:
        h.stop()
    return {'%s_transfer_MBps' % engine: round(statistics.median(rates), 1),
            '%s_copy_s' % engine: round(statistics.median(downs), 3),
            '%s_bytes' % engine: int(statistics.median(sizes))}


def main(runs):
    # Something to read that is not zeroes.
    dmutil.pwrite(ORIGIN, 0, os.urandom(WSET))
    res = read_throughput(runs)
    res.update(transfer('dmcache', runs, 7460))
    res.update(transfer('ucache', runs, 7470))
    res['ratio_transfer_dmcache_vs_ucache'] = round(
        res['dmcache_transfer_MBps'] / res['ucache_transfer_MBps'], 2)
    res['runs'] = runs
    for k in sorted(res):
        print('BENCH %s %s' % (k, res[k]))
    out.update(res)
    out['ok'] = True


if __name__ == '__main__':
    ad.run_scenario(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3)
