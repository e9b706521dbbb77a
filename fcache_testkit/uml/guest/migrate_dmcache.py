# SPDX-License-Identifier: Apache-2.0
"""Live cache migration between two dmcache agents, inside UML.

``python3 migrate_dmcache.py POLICY STRATEGY...``: two agents share the
kernel (two "hosts": prefixes ``ha``/``hb``, flash devices $DEV_FLASH_A
and $DEV_FLASH_B, one shared origin $DEV_ORIGIN).  One volume moves
back and forth, one migration per STRATEGY, while a VM stand-in keeps
reading and writing it: every read is checked against an oracle (the
last acknowledged write), including the reads made while blocks are
being copied and those served by the migrated cache afterwards.  Prints
``RESULT {json}``; exits non-zero on the first failed check.
"""

import errno
import mmap
import os
import random
import secrets
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_dmcache as ad  # noqa: E402
import dmutil  # noqa: E402

MiB = 1 << 20
ORIGIN = os.environ['DEV_ORIGIN']
SPAN = 24 * MiB           # the VM's disk: the first 24 MiB of the origin
HOT = 4 * MiB             # 80 % of the requests land here
out = ad.out                # what ad.check reports on a failure
out['migrations'] = []
check = ad.check


class Vm(object):
    """A VM stand-in: O_DIRECT requests on a block device, in a thread.

    pause() returns once the request in flight completed; move() opens
    another device (the destination's export); every read is compared
    with the model.
    """

    def __init__(self, dev, model, seed):
        self.model = model
        self.rng = random.Random(seed)
        self.buf = mmap.mmap(-1, 128 * 1024)
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.dev = dev
        self.reads = self.writes = 0
        self.thread = None
        self.stop = None
        self.error = None

    def op(self):
        n = self.rng.choice((4096, 16384, 65536, 131072))
        zone = HOT if self.rng.random() < 0.8 else SPAN
        off = self.rng.randrange(0, (zone - n) // 4096 + 1) * 4096
        view = memoryview(self.buf)[:n]
        if self.rng.random() < 0.3:
            data = self.rng.randbytes(n)
            view[:] = data
            got = os.pwritev(self.fd, [view], off)
            check(got == n, 'short write at %d' % off)
            self.model[off:off + n] = data
            self.writes += 1
        else:
            got = os.preadv(self.fd, [view], off)
            check(got == n and bytes(view) == bytes(self.model[off:off + n]),
                  'read %d+%d on %s differs from the last acknowledged '
                  'write' % (off, n, self.dev))
            self.reads += 1

    def _run(self):
        try:
            while not self.stop.is_set():
                self.op()
        except SystemExit:
            self.error = out.get('failed', 'check failed')
        except BaseException as e:        # reported by pause()
            self.error = repr(e)

    def resume(self):
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def pause(self):
        if self.thread:
            self.stop.set()
            self.thread.join(60)
            check(not self.thread.is_alive(), 'VM did not drain')
            self.thread = None
        check(self.error is None, 'VM: %s' % self.error)

    def move(self, dev):
        os.close(self.fd)
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.dev = dev

    def check_all(self, length):
        """Read [0, length) in 128 KiB requests and compare."""
        for off in range(0, length, 128 * 1024):
            view = memoryview(self.buf)
            got = os.preadv(self.fd, [view], off)
            check(got == len(view) and
                  bytes(view) == bytes(self.model[off:off + len(view)]),
                  'full check: %d+128K on %s differs' % (off, self.dev))

    def close(self):
        os.close(self.fd)


def warm(agent, vol, want=48, limit_s=20):
    """Let the running VM warm the cache until smq holds `want` blocks."""
    t0 = time.monotonic()
    show = agent.ok('volume-show', volume_id=vol)
    while show['cached_blocks'] < want and time.monotonic() - t0 < limit_s:
        time.sleep(0.3)
        show = agent.ok('volume-show', volume_id=vol)
    return show


def probe_before_switch(dev, policy, model):
    """The hypervisor's read of the destination before the switchover.

    It is answered at once: the origin where that is current, an error
    for write_back (the source may hold dirty blocks) -- never older data.
    """
    buf = mmap.mmap(-1, 65536)
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        got, err = os.preadv(fd, [buf], 0), None
    except OSError as e:
        got, err = 0, e.errno
    finally:
        os.close(fd)
    if policy == 'write_back':
        check(err == errno.EIO, 'write_back destination read before the '
              'switchover: %r, expected EIO' % (err,))
    else:
        check(err is None and got == len(buf) and
              bytes(buf) == bytes(model[:len(buf)]),
              'destination read before the switchover: %r, %d bytes, %s' % (
                  err, got, 'right' if bytes(buf) == bytes(
                      model[:len(buf)]) else 'wrong data'))


def switchover_waits_for(src, dst, mid, stopped_s=0.5):
    """The source's switchover returns once the destination serves.

    The destination agent is stopped (SIGSTOP) while the source switches
    over: the call must still be waiting when it is let go, as the
    hypervisor resumes the guest on the destination once it returns.
    """
    answer = {}

    def switchover():
        answer['r'] = src.call('migration-switchover', migration_id=mid)

    dst.proc.send_signal(signal.SIGSTOP)
    t = threading.Thread(target=switchover, daemon=True)
    try:
        t.start()
        t.join(stopped_s)
        returned_early = not t.is_alive()
    finally:
        dst.proc.send_signal(signal.SIGCONT)
    t.join(60)
    check(not returned_early, 'migration %s: the switchover returned while '
          'the destination agent was stopped: %r' % (mid, answer.get('r')))
    check(not t.is_alive() and answer['r'].get('ok'),
          'migration %s: switchover: %r' % (mid, answer.get('r')))


def migrate(src, dst, vol, strategy, vm, rate_bps=0):
    """The orchestrator's phases (nova_ext.migration), VM moved between."""
    vshow = src.ok('volume-show', volume_id=vol)
    mid = 'm%d-%s' % (len(out['migrations']), strategy)
    token = secrets.token_hex(32)
    # migration_tls = pinned: each agent pins the other's fingerprint.
    key = src.ok('migration-key', migration_id=mid, volume_id=vol)
    inc = dst.ok('migration-incoming', migration_id=mid, volume_id=vol,
                 token=token, strategy=strategy, origin=vshow['origin'],
                 cache_size=vshow['cache_size'],
                 write_policy=vshow['write_policy'],
                 admission=vshow['admission'],
                 peer_fingerprint=key.get('fingerprint'))
    src.ok('migration-outgoing', migration_id=mid, volume_id=vol,
           token=token, strategy=strategy, destination=inc['listen'],
           rate_limit_bps=rate_bps, peer_fingerprint=inc.get('fingerprint'))
    t0 = time.monotonic()
    if strategy == 'firepan':
        vm.pause()            # the copy runs while the VM is paused
        src.ok('migration-start', migration_id=mid)
    else:
        src.ok('migration-start', migration_id=mid)
        vm.pause()
    probe_before_switch(inc['export_uri'], vshow['write_policy'], vm.model)
    vm.move(inc['export_uri'])
    switchover_waits_for(src, dst, mid)
    # The hypervisor resumes the guest as the switchover returns: the
    # destination's final table must be in by then (a cache, or dm-era
    # while blocks arrive), not the interim error or linear table.
    table = dmutil.dmsetup('table %s' % os.path.basename(
        inc['export_uri'])).stdout.split()
    check(len(table) > 2 and table[2] in ('cache', 'era'),
          'destination of %s serves %r after the switchover returned' % (
              mid, table[2:3]))
    vm.resume()               # on the destination, during any copy
    while True:
        st = dst.ok('migration-status', migration_id=mid)
        if st['state'] in ('completed', 'failed', 'aborted'):
            break
        check(time.monotonic() - t0 < 120, 'migration %s stuck: %r' % (
            mid, st))
        time.sleep(0.05)
    check(st['state'] == 'completed', 'migration %s: %r' % (mid, st))
    src_st = src.ok('migration-finish', migration_id=mid, timeout_s=60)
    rec = {'strategy': strategy, 'cached_before': vshow['cached_blocks'],
           'dirty_before': vshow['dirty_blocks'],
           'duration_s': round(time.monotonic() - t0, 3),
           'downtime_s': round(src_st['downtime_s'], 3),
           'blocks_transferred': src_st['blocks_done'],
           'bytes_transferred': src_st['bytes_done'],
           'invalidated_blocks': st['invalidated_blocks'],
           'installed_copies': st.get('installed_copies', 0),
           'era_written_blocks': st.get('era_written_blocks', 0)}
    return rec


def refusals(a, b):
    """On-demand strategies are refused, clearly, by both agents.

    hybrid as a preview (asked for with "experimental": true), cloudcache
    outright.
    """
    for strategy, why in (('cloudcache', 'needs engine ucache'),
                          ('hybrid', 'is a preview')):
        r = b.call('migration-incoming', migration_id='x-' + strategy,
                   volume_id='vx', token='0' * 64, strategy=strategy,
                   origin=ORIGIN, cache_size=8 * MiB,
                   write_policy='write_through', admission='all')
        check(not r['ok'] and why in r['error'], r)
        r = a.call('migration-outgoing', migration_id='y-' + strategy,
                   volume_id='vm1', token='0' * 64, strategy=strategy,
                   destination='127.0.0.1:1')
        check(not r['ok'] and why in r['error'], r)
        out['refused_' + strategy] = r['error']
    # What the agent publishes agrees: the same two, with the same reason,
    # and lr alone for storage moves.
    caps = a.ok('capabilities')
    out['capabilities'] = {s['name']: s['supported']
                           for s in caps['strategies']}
    out['capabilities_why'] = {s['name']: s.get('why_not', '')
                               for s in caps['strategies']}
    out['move_schemes'] = caps['move_schemes']
    # Settling is hybrid's alone on dmcache (its own test); a volume this
    # agent does not hold is refused as on ucache.
    r = a.call('migration-settle', migration_id='z', volume_id='vx',
               step='list')
    check(not r['ok'] and 'vx is not attached' in r['error'], r)


def main(policy, strategies):
    extra = 'migration_listen = 127.0.0.1:%d\n'
    a = ad.Agent('ha', prefix='ha', flash=os.environ['DEV_FLASH_A'],
                 cache_size='32M', extra=extra % 7441)
    b = ad.Agent('hb', prefix='hb', flash=os.environ['DEV_FLASH_B'],
                 cache_size='32M', extra=extra % 7442)
    # The origin's initial content: random, so a stale block shows.
    init = random.Random(7).randbytes(SPAN)
    dmutil.pwrite(ORIGIN, 0, init)
    a.start()
    b.start()
    vol = 'vm1'
    dev = a.ok('volume-attach', volume_id=vol, origin=ORIGIN,
               cache_size='8M', write_policy=policy)['export_uri']
    refusals(a, b)
    vm = Vm(dev, bytearray(init), seed=policy)
    vm.resume()
    hosts = [a, b]
    for i, strategy in enumerate(strategies):
        src, dst = hosts[i % 2], hosts[(i + 1) % 2]
        before = warm(src, vol)
        # firepan_if: a rate limit keeps the copy going while the VM writes.
        rate = 16 * 1000 * 1000 if strategy == 'firepan_if' else 0
        rec = migrate(src, dst, vol, strategy, vm, rate)
        vm.pause()
        after = dst.ok('volume-show', volume_id=vol)
        rec['cached_after'] = after['cached_blocks']
        rec['mode_after'] = after['mode']
        check(after['mode'] == ('writeback' if policy == 'write_back'
                                else 'writethrough'), after)
        check(src.call('volume-show', volume_id=vol)['errno'] == 2,
              'source still has the volume')
        if strategy in ('firepan', 'firepan_if', 'cachemior'):
            check(before['cached_blocks'] > 0, 'source was cold: %r' % before)
            check(after['cached_blocks'] > 0, '%s: destination cold: %r' % (
                strategy, after))
        if strategy == 'firepan' and policy == 'write_back':
            rec['dirty_after'] = after['dirty_blocks']
        if strategy == 'firepan_if':
            check(rec['era_written_blocks'] > 0,
                  'no write recorded during the copy: %r' % rec)
        # Every block the VM can see, from the migrated cache or not.
        vm.check_all(SPAN)
        rec['hits_after_check'] = dst.ok('volume-show',
                                         volume_id=vol)['read_hits']
        out['migrations'].append(rec)
        vm.resume()
    time.sleep(1)
    vm.pause()
    out.update(reads=vm.reads, writes=vm.writes)
    vm.close()
    last = hosts[len(strategies) % 2]
    last.ok('volume-detach', volume_id=vol)
    # Detach wrote everything back: the origin alone is right.
    check(dmutil.pread(ORIGIN, 0, SPAN) == bytes(vm.model),
          'origin after the last detach differs from the acknowledged writes')
    for h in hosts:
        st = h.ok('agent-status')
        check(st['used_bytes'] == 0 and st['volumes'] == [],
              'flash left allocated: %r' % st)
        h.stop()
    left = dmutil.dmsetup('ls').stdout
    check('ha-' not in left and 'hb-' not in left, 'devices left: %s' % left)
    out['ok'] = True


if __name__ == '__main__':
    out['policy'] = sys.argv[1]
    ad.run_scenario(main, sys.argv[1], sys.argv[2:])
