# SPDX-License-Identifier: Apache-2.0
"""hybrid between two dmcache agents, inside UML (nbd.ko loaded).

``python3 migrate_dmcache_hybrid.py POLICY``: the two "hosts" of
migrate_dmcache.py.  One volume moves a -> b -> a with ``hybrid``
(``"experimental": true``), rate-limited so that the destination's
dm-clone is still hydrating through the relay while the VM stand-in reads
and writes the destination; every read is checked against the oracle
(the last acknowledged write).  Then a -> b once more, and the source
agent is killed (SIGKILL) mid-hydration: the destination must fail the
migration with a message an operator can act on, and every read of the
VM stand-in (reads only: a write that fails may or may not have reached
the origin, which would leave the oracle unsure) is either the oracle's
data or EIO -- never zeros, never a stale block.  The source agent
restarts and is asked to settle (as Nova's driver does, on the source's
host): it has the destination settle from its side, the rest of the
cache comes from the source's frozen cache, nothing is lost.  Then
b -> a with the destination a killed mid-hydration and started again:
it takes the clone up again, reads are the oracle's or EIO, and its
settle copies the rest from b.  Then a -> b with a killed the same way
as first, and b settles with a given up: the
rest comes from the origin and every read succeeds, differing from the
oracle only in blocks dirty at the switchover that it reports as given
up.  Prints ``RESULT {json}``.
"""

import errno
import fcntl
import os
import secrets
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402
import migrate_dmcache as md  # noqa: E402

MiB = 1 << 20
out = ad.out
out['migrations'] = []
check = ad.check
RATE = 4 * 1000 * 1000        # the copy takes a second or two at 64 KiB
SLOW = 1000 * 1000            # for the kill: hydration still running
NBD_CLEAR_SOCK = 0xab04       # linux/nbd.h: _IO(0xab, 4)
NBD_DISCONNECT = 0xab08       # _IO(0xab, 8)


def nbd_sizes():
    """The kernel NBD devices' sizes: a connected relay's is the cache."""
    sizes = {}
    for d in os.listdir('/sys/block'):
        if d.startswith('nbd'):
            with open('/sys/block/%s/size' % d) as f:
                sizes[d] = int(f.read())
    return sizes


def prepare(src, dst, vol, mid, rate, experimental=True):
    vshow = src.ok('volume-show', volume_id=vol)
    token = secrets.token_hex(32)
    key = src.ok('migration-key', migration_id=mid, volume_id=vol)
    extra = {'experimental': True} if experimental else {}
    inc = dst.ok('migration-incoming', migration_id=mid, volume_id=vol,
                 token=token, strategy='hybrid', origin=vshow['origin'],
                 cache_size=vshow['cache_size'],
                 write_policy=vshow['write_policy'],
                 admission=vshow['admission'],
                 peer_fingerprint=key.get('fingerprint'), **extra)
    src.ok('migration-outgoing', migration_id=mid, volume_id=vol,
           token=token, strategy='hybrid', destination=inc['listen'],
           rate_limit_bps=rate, peer_fingerprint=inc.get('fingerprint'),
           **extra)
    return vshow, inc


def switch(src, dst, vol, mid, vm, inc, vshow):
    """Start, move the VM, switch over; the VM runs on the destination."""
    src.ok('migration-start', migration_id=mid)
    vm.pause()
    md.probe_before_switch(inc['export_uri'], vshow['write_policy'],
                           vm.model)
    vm.move(inc['export_uri'])
    md.switchover_waits_for(src, dst, mid)
    # SWITCHED came once the cache table over the clone was live.
    export = os.path.basename(inc['export_uri'])
    table = dmutil.dmsetup('table %s' % export).stdout.split()
    check(len(table) > 2 and table[2] == 'cache',
          '%s serves %r after the switchover' % (mid, table[2:3]))
    clone = dmutil.dmsetup('table %s-mclone' % export).stdout.split()
    check(len(clone) > 2 and clone[2] == 'clone',
          '%s: no clone under the cache: %r' % (mid, clone))
    return export


def migrate(src, dst, vol, vm, rate):
    mid = 'h%d' % len(out['migrations'])
    used_before = src.ok('agent-status')['used_bytes']
    vshow, inc = prepare(src, dst, vol, mid, rate)
    t0 = time.monotonic()
    export = switch(src, dst, vol, mid, vm, inc, vshow)
    check(any(nbd_sizes().values()), 'no relay device connected')
    ops0 = vm.reads + vm.writes
    vm.resume()
    partial = None
    while True:
        st = dst.ok('migration-status', migration_id=mid)
        h = st.get('hydration', {})
        if st['state'] != 'completed' and h.get('regions_total') and \
                h['regions_hydrated'] < h['regions_total'] and not partial:
            partial = dict(h)
            # volume-show says so too, while the cache reads the source.
            vs = dst.ok('volume-show', volume_id=vol)
            partial['volume_state'] = vs['state']
        if st['state'] in ('completed', 'failed', 'aborted'):
            break
        check(time.monotonic() - t0 < 120, '%s stuck: %r' % (mid, st))
        time.sleep(0.05)
    ops_during = vm.reads + vm.writes - ops0
    check(st['state'] == 'completed', '%s: %r' % (mid, st))
    h = st['hydration']
    check(h['hydrated'] and h['regions_hydrated'] == h['regions_total'], h)
    check(partial is not None, '%s: never seen hydrating: %r' % (mid, h))
    check(partial['volume_state'] == 'migrating', partial)
    # The stack is down to cdata: no clone, no relay device.
    check(not ad.exists(export + '-mclone') and
          not ad.exists(export + '-mclmeta'), 'clone left after COMPLETE')
    check(not any(nbd_sizes().values()), 'relay device still connected: %r'
          % nbd_sizes())
    # And its flash: the destination holds what the source held.
    used_after = dst.ok('agent-status')['used_bytes']
    check(used_after == used_before, 'destination flash %d bytes, source '
          'had %d: the clone\'s metadata left allocated?' % (used_after,
                                                             used_before))
    src_st = src.ok('migration-finish', migration_id=mid, timeout_s=60)
    vm.pause()
    after = dst.ok('volume-show', volume_id=vol)
    check(after['mode'] == ('writeback' if vshow['write_policy'] ==
                            'write_back' else 'writethrough'), after)
    check(src.call('volume-show', volume_id=vol)['errno'] == 2,
          'source still has the volume')
    check(after['cached_blocks'] > 0, 'destination cold: %r' % after)
    vm.check_all(md.SPAN)
    rec = {'cached_before': vshow['cached_blocks'],
           'dirty_before': vshow['dirty_blocks'],
           'duration_s': round(time.monotonic() - t0, 3),
           'downtime_s': round(src_st['downtime_s'], 3),
           'rate_limit_bps': rate,
           'vm_ops_during_hydration': ops_during,
           'seen_partial': partial, 'hydration': h,
           'fetched_blocks': st['fetched_blocks'],
           'cached_after': after['cached_blocks'],
           'dirty_after': after['dirty_blocks']}
    out['migrations'].append(rec)
    vm.resume()
    return rec


def oracle_or_eio(vm, when):
    """Read the disk in 64 KiB: each read is the oracle's data or EIO.

    Both kinds must be there (some blocks copied, some not yet).
    Returns (good, eio).
    """
    good = eio = 0
    view = memoryview(vm.buf)
    for off in range(0, md.SPAN, 64 * 1024):
        v = view[:64 * 1024]
        try:
            n = os.preadv(vm.fd, [v], off)
        except OSError as e:
            check(e.errno == errno.EIO, 'read at %d: %r' % (off, e))
            eio += 1
            continue
        check(n == len(v) and bytes(v) == bytes(vm.model[off:off + n]),
              'read at %d %s differs from the oracle' % (off, when))
        good += 1
    check(eio > 0 and good > 0, 'good %d, EIO %d' % (good, eio))
    return good, eio


def killed_source(src, dst, vol, vm, mid, reboot=False):
    """The source agent dies mid-hydration.

    With reboot, its host: every device of it is gone before it starts.
    """
    vshow, inc = prepare(src, dst, vol, mid, SLOW)
    switch(src, dst, vol, mid, vm, inc, vshow)
    time.sleep(0.3)
    src.proc.send_signal(signal.SIGKILL)
    src.proc.wait(10)
    t0 = time.monotonic()
    while True:
        st = dst.ok('migration-status', migration_id=mid)
        if st['state'] != 'switched':
            break
        check(time.monotonic() - t0 < 60, 'no failure seen: %r' % st)
        time.sleep(0.05)
    check(st['state'] == 'failed', 'after the source died: %r' % st)
    check('not yet copied from the source' in st['error'] and
          'EIO' in st['error'], st['error'])
    h = st['hydration']
    check(h['regions_hydrated'] < h['regions_total'], h)
    vs = dst.ok('volume-show', volume_id=vol)
    check(vs['state'] == 'degraded' and 'fail with EIO' in vs['error'], vs)
    # Reads only: each one is the oracle's data or EIO.
    good, eio = oracle_or_eio(vm, 'after the source died')
    if reboot:
        name = '%s-%s' % (src.prefix, vol)
        for n in (name, name + '-cmeta', name + '-cdata'):
            ad.dmsetup('remove ' + n)
    out.setdefault('killed_source', []).append(
        {'rebooted': reboot, 'error': st['error'], 'hydration': h,
         'volume_show_error': vs['error'], 'good_reads': good,
         'eio_reads': eio})
    return h


def reboot_devices(export):
    """What a host reboot leaves: no device-mapper device, no NBD one."""
    used = [d for d, size in nbd_sizes().items() if size]
    for n in (export, export + '-mclone', export + '-mclmeta',
              export + '-cmeta', export + '-cdata'):
        ad.dmsetup('remove ' + n)
    for d in used:
        fd = os.open('/dev/' + d, os.O_RDWR)
        try:
            fcntl.ioctl(fd, NBD_DISCONNECT)
            fcntl.ioctl(fd, NBD_CLEAR_SOCK)
        finally:
            os.close(fd)
    check(not any(nbd_sizes().values()), 'NBD device left: %r' % nbd_sizes())


def killed_destination(src, dst, vol, vm, mid, reboot=False):
    """The destination agent dies mid-hydration and starts again.

    The kernel holds the reads of blocks not copied while no relay
    answers; the restarted agent takes the clone up again (its relay cut:
    no migration to fetch through), says so in volume-show, and each read
    is the oracle's data or EIO until the volume is settled.  With reboot,
    every device is gone before it starts (a host reboot): it builds the
    cache over the clone again, never over its data segment alone.
    """
    vshow, inc = prepare(src, dst, vol, mid, SLOW)
    switch(src, dst, vol, mid, vm, inc, vshow)
    time.sleep(0.3)
    dst.proc.send_signal(signal.SIGKILL)
    # A thread of it may wait on a request only its own relay would
    # answer: the kernel gives the socket up after RELAY_REQUEST_S and the
    # dead-connection time, and the process ends.
    t0 = time.monotonic()
    try:
        dst.proc.wait(90)
    except subprocess.TimeoutExpired:
        pid = dst.proc.pid
        stuck = {}
        for t in os.listdir('/proc/%d/task' % pid):
            try:
                with open('/proc/%d/task/%s/stack' % (pid, t)) as f:
                    stuck[t] = f.read()[:800]
            except OSError as e:
                stuck[t] = repr(e)
        check(False, 'the killed destination agent did not end: %r' % stuck)
    exit_s = round(time.monotonic() - t0, 2)
    if reboot:
        os.close(vm.fd)
        reboot_devices(os.path.basename(vm.dev))
    dst.start()
    if reboot:
        vm.fd = os.open(vm.dev, os.O_RDWR | os.O_DIRECT)
        check(ad.exists(os.path.basename(vm.dev) + '-mclone'),
              'the cache was rebuilt without its clone')
    vs = dst.ok('volume-show', volume_id=vol)
    check(vs.get('state') == 'degraded' and
          ('host restarted' if reboot else 'agent restarted') in
          vs.get('error', '') and
          vs['regions_hydrated'] < vs['regions_total'], vs)
    # The source saw its stream break: failed, its frozen cache kept.
    t0 = time.monotonic()
    while src.ok('migration-status', migration_id=mid)['state'] == 'switched':
        check(time.monotonic() - t0 < 60, 'the source did not see the loss')
        time.sleep(0.05)
    t0 = time.monotonic()
    good, eio = oracle_or_eio(vm, 'after the restart')
    out['killed_destination'] = {
        'rebooted': reboot,
        'volume_show': vs, 'good_reads': good, 'eio_reads': eio,
        'exit_s': exit_s,
        'reads_s': round(time.monotonic() - t0, 3)}


def settle_from_destination(src, dst, vol, vm, mid, restarted='source',
                            asked_from=None):
    """The source agent is back: the destination settles from its host.

    It copies what is left of the cache from the source's frozen cache
    over a settle session, then the source drops its copy: nothing is
    given up, and the whole disk reads as the oracle.
    """
    ids = {'migration_id': mid, 'volume_id': vol}
    r = dst.call('migration-settle', step='list', **ids)
    check(not r['ok'] and 'from the destination host' in r['error'], r)
    if restarted == 'source':
        # The restarted source holds the volume frozen, and says why.
        vs = src.ok('volume-show', volume_id=vol)
        check('did not complete' in vs.get('error', ''), vs)
    # Asked from the source's host (as Nova's driver does), the source has
    # the destination settle from its side.
    t0 = time.monotonic()
    res = (asked_from or dst).ok('migration-settle', step='all', **ids)
    took = time.monotonic() - t0
    check(res['mode'] == 'missing' and res['given_up_blocks'] == 0 and
          res['settled_from'] == 'destination', res)
    if asked_from is src:
        check(res.get('asked_by') == 'source', res)
    hs = None
    if restarted == 'source':
        st = dst.ok('migration-status', migration_id=mid)
        hs = st['hydration']
        check(st['state'] == 'settled' and hs['hydrated'] and
              hs['settled_from_source'] and not hs['from_origin'], st)
    vs = dst.ok('volume-show', volume_id=vol)
    check('error' not in vs and
          vs.get('state') not in ('hydrating', 'degraded'), vs)
    export = os.path.basename(vm.dev)
    check(not ad.exists(export + '-mclone') and
          not ad.exists(export + '-mclmeta'), 'clone left after the settle')
    check(not any(nbd_sizes().values()), 'relay device still connected')
    check(src.call('volume-show', volume_id=vol)['errno'] == 2,
          'the source still holds the volume')
    # Nothing was lost: every byte is the oracle's.
    vm.check_all(md.SPAN)
    ops0 = vm.reads + vm.writes
    vm.resume()
    time.sleep(1.0)
    vm.pause()
    vm.check_all(md.SPAN)
    out.setdefault('settled_from_destination', []).append({
        'restarted': restarted, 'result': res, 'hydration': hs,
        'asked_from': 'source' if asked_from is src else 'destination',
        'settle_s': round(took, 3),
        'vm_ops_after': vm.reads + vm.writes - ops0})


def settle_lost(dst, vol, vm, mid, h):
    """Settle on the destination with the source given up.

    The list step alone would need the source's blocks first: it points
    at settling from the destination's host, or --source-lost; an end
    that claims the source released is refused.  With the source given up,
    the blocks not copied come from the origin: no read fails any more,
    and a block can differ from the oracle only if it was dirty at the
    switchover and not copied (write_back), at most given_up_blocks of
    them.
    """
    ids = {'migration_id': mid, 'volume_id': vol}
    r = dst.call('migration-settle', step='list', **ids)
    check(not r['ok'] and '--source-lost' in r['error'] and
          'from the destination host' in r['error'], r)
    r = dst.call('migration-settle', step='end', source='released', **ids)
    check(not r['ok'] and 'source=lost' in r['error'], r)
    t0 = time.monotonic()
    end = dst.ok('migration-settle', step='end', source='lost', **ids)
    given_up = end['given_up_blocks']
    if out['policy'] != 'write_back':
        check(given_up == 0, 'given up %d blocks of a %s volume'
              % (given_up, out['policy']))
    check(given_up <= h['restored_dirty_blocks'], (end, h))
    # The copy goes on from the origin; meanwhile nothing may reload the
    # cache over its data device.
    r = dst.call('volume-detach', volume_id=vol)
    busy = r.get('error', '')
    check(not r['ok'], 'detached mid-copy: %r' % r)
    while True:
        vs = dst.ok('volume-show', volume_id=vol)
        if vs.get('state') != 'hydrating':
            break
        check(vs.get('hydrating_from') == 'origin', vs)
        check(time.monotonic() - t0 < 60, 'still hydrating: %r' % vs)
        time.sleep(0.05)
    check('error' not in vs and vs.get('state') != 'degraded', vs)
    export = os.path.basename(vm.dev)
    check(not ad.exists(export + '-mclone') and
          not ad.exists(export + '-mclmeta'), 'clone left after the settle')
    check(not any(nbd_sizes().values()), 'relay device still connected')
    st = dst.ok('migration-status', migration_id=mid)
    check(st['state'] == 'settled', st)
    hs = st['hydration']
    check(hs['hydrated'] and hs['from_origin'] and hs['origin_fetched'] > 0 and
          hs['given_up_blocks'] == given_up, hs)
    # Every read now succeeds; what differs from the oracle was given up.
    differs = []
    view = memoryview(vm.buf)
    for off in range(0, md.SPAN, 64 * 1024):
        v = view[:64 * 1024]
        n = os.preadv(vm.fd, [v], off)
        check(n == len(v), 'short read at %d' % off)
        if bytes(v) != bytes(vm.model[off:off + n]):
            differs.append(off)
            vm.model[off:off + n] = bytes(v)
    check(len(differs) <= given_up, '%d blocks differ from the oracle, %d '
          'given up: %r' % (len(differs), given_up, differs[:8]))
    # The volume runs on: reads and writes against the oracle.
    ops0 = vm.reads + vm.writes
    vm.resume()
    time.sleep(1.5)
    vm.pause()
    vm.check_all(md.SPAN)
    out['settled_lost'] = {'given_up_blocks': given_up,
                           'differing_blocks': len(differs),
                           'hydration': hs, 'busy_detach': busy,
                           'settle_to_hydrated_s':
                               round(time.monotonic() - t0, 3),
                           'vm_ops_after': vm.reads + vm.writes - ops0}


def main(policy):
    extra = 'migration_listen = 127.0.0.1:%d\n'
    a = ad.Agent('ha', prefix='ha', flash=os.environ['DEV_FLASH_A'],
                 cache_size='32M', extra=extra % 7441)
    b = ad.Agent('hb', prefix='hb', flash=os.environ['DEV_FLASH_B'],
                 cache_size='32M', extra=extra % 7442)
    init = md.random.Random(7).randbytes(md.SPAN)
    dmutil.pwrite(md.ORIGIN, 0, init)
    a.start()
    b.start()
    vol = 'vm1'
    dev = a.ok('volume-attach', volume_id=vol, origin=md.ORIGIN,
               cache_size='8M', write_policy=policy)['export_uri']
    # Not by accident: without "experimental" both agents refuse it.
    r = b.call('migration-incoming', migration_id='x', volume_id='vx',
               token='0' * 64, strategy='hybrid', origin=md.ORIGIN,
               cache_size=8 * MiB, write_policy='write_through')
    check(not r['ok'] and 'is a preview' in r['error'], r)
    r = a.call('migration-outgoing', migration_id='y', volume_id=vol,
               token='0' * 64, strategy='hybrid', destination='127.0.0.1:1')
    check(not r['ok'] and 'is a preview' in r['error'], r)
    out['refused'] = r['error']
    vm = md.Vm(dev, bytearray(init), seed=policy)
    vm.resume()
    hosts = [a, b]
    for i in range(2):
        src, dst = hosts[i % 2], hosts[(i + 1) % 2]
        md.warm(src, vol, want=100)
        migrate(src, dst, vol, vm, RATE)
    md.warm(a, vol, want=100)
    vm.pause()
    # The source's host rebooted with write_back (its dirty blocks are the
    # only current copies), its agent killed with the other two policies.
    killed_source(a, b, vol, vm, 'hk', reboot=out['policy'] == 'write_back')
    a.start()
    if out['policy'] == 'write_back':
        # Frozen again: an error table, never a cache writing back.
        table = dmutil.dmsetup('table %s-%s' % (a.prefix, vol)).stdout.split()
        check(len(table) > 2 and table[2] == 'error', table)
    settle_from_destination(a, b, vol, vm, 'hk', asked_from=a)
    vm.resume()
    md.warm(b, vol, want=100)
    vm.pause()
    # Rebooted with write_back (dirty blocks only on the source), killed
    # with the other two policies.
    killed_destination(b, a, vol, vm, 'hd',
                       reboot=out['policy'] == 'write_back')
    settle_from_destination(b, a, vol, vm, 'hd', restarted='destination')
    vm.resume()
    md.warm(a, vol, want=100)
    vm.pause()
    h = killed_source(a, b, vol, vm, 'hk2')
    settle_lost(b, vol, vm, 'hk2', h)
    out.update(reads=vm.reads, writes=vm.writes)
    vm.close()
    out['ok'] = True


if __name__ == '__main__':
    out['policy'] = sys.argv[1]
    ad.run_scenario(main, sys.argv[1])
