# SPDX-License-Identifier: Apache-2.0
"""Scenarios of the dmcache engine, run inside UML against the real agent.

``python3 agent_dmcache.py SCENARIO [ARG]`` with SCENARIO one of
lifecycle, oracle (ARG = write policy), faults.  Prints ``RESULT {json}``
and exits non-zero on the first failed check.  The agent is
$FCACHE_AGENT; devices $DEV_ORIGIN and $DEV_FLASH_A.
"""

import errno
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dmutil  # noqa: E402

dmsetup, pread, pwrite = dmutil.dmsetup, dmutil.pread, dmutil.pwrite
report, blksize = dmutil.report, dmutil.blksize

AGENT = os.environ['FCACHE_AGENT']
RT = os.environ['UML_RT']
# Not every scenario has one (origins_ucache.py uses Agent alone).
ORIGIN = os.environ.get('DEV_ORIGIN')
FLASH = os.environ['DEV_FLASH_A']
MiB = 1 << 20
out = {}
# The agents a scenario started: a failed check reports their logs.
AGENTS = []


def diagnose():
    """What explains a failure: each agent's log tail, the kernel's."""
    for a in AGENTS:
        try:
            out.setdefault('logs', {})[a.dir] = a.logtext()[-2500:]
        except OSError as e:
            out.setdefault('logs', {})[a.dir] = repr(e)
    try:
        dmesg = subprocess.run(['dmesg'], capture_output=True, text=True,
                               timeout=10).stdout
        out['dmesg'] = dmesg[-2500:]
    except (OSError, subprocess.SubprocessError) as e:
        out['dmesg'] = 'dmesg: %r' % e


def check(cond, msg):
    if not cond:
        out['failed'] = msg
        diagnose()
        report(out)
        sys.exit(1)


class Agent(object):
    def __init__(self, name='a', prefix='fcache', flash=FLASH,
                 cache_size='40M', block_size='64K', extra=''):
        self.dir = os.path.join(RT, name)
        os.makedirs(os.path.join(self.dir, 'state'), exist_ok=True)
        self.sock = os.path.join(self.dir, 'agent.sock')
        self.log = os.path.join(self.dir, 'agent.log')
        self.conf = os.path.join(self.dir, 'agent.conf')
        self.flash, self.cache_size, self.block_size = flash, cache_size, \
            block_size
        self.prefix, self.extra = prefix, extra
        with open(self.conf, 'w') as f:
            f.write(self.config())
        self.proc = None
        AGENTS.append(self)

    def config(self):
        """agent.conf's text (a subclass may configure another agent)."""
        return ('[agent]\nengine = dmcache\ncontrol_socket = %s\n'
                'state_dir = %s/state\nexport_dir = %s/exports\n'
                'cache_path = %s\ncache_size = %s\nblock_size = %s\n'
                'dm_prefix = %s\nlog_level = debug\n'
                # The guest's disks are ubd devices; dmutil's test devices
                # are in /dev/mapper.
                'origin_prefixes = /dev/ubd,/dev/mapper/\n%s' % (
                    self.sock, self.dir, self.dir, self.flash,
                    self.cache_size, self.block_size, self.prefix,
                    self.extra))

    def start(self, expect_ok=True):
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        logf = open(self.log, 'a')
        self.proc = subprocess.Popen([AGENT, '--config', self.conf],
                                     stdout=logf, stderr=logf)
        for _ in range(200):
            if os.path.exists(self.sock):
                return
            if self.proc.poll() is not None:
                check(not expect_ok, 'agent exited: %s' % self.logtext())
                return
            time.sleep(0.05)
        check(False, 'agent did not create its socket')

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        check(rc == 0, 'agent exit status %d: %s' % (rc, self.logtext()))

    def logtext(self):
        with open(self.log) as f:
            return f.read()[-3000:]

    def call(self, op, **args):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.sock)
        s.sendall((json.dumps({'op': op, 'args': args}) + '\n').encode())
        buf = b''
        while not buf.endswith(b'\n'):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        s.close()
        return json.loads(buf)

    def ok(self, op, **args):
        r = self.call(op, **args)
        check(r.get('ok'), '%s %r failed: %r' % (op, args, r))
        return r['result']


def exists(name):
    return dmsetup('info ' + name, check=False).returncode == 0


def lifecycle():
    a = Agent()
    a.start()
    st = a.ok('agent-status')
    check(st['engine'] == 'dmcache' and st['capacity_bytes'] == 40 * MiB,
          'status %r' % st)
    check(st['used_bytes'] == 0 and st['free_bytes'] == 40 * MiB, st)
    r = a.ok('volume-attach', volume_id='vol1', origin=ORIGIN,
             cache_size='8M', write_policy='write_through')
    check(r['export_uri'] == '/dev/mapper/fcache-vol1', r)
    check(os.path.exists(r['export_uri']), 'no node %s' % r['export_uri'])
    # Metadata: 4 MiB + 28 B x 128 blocks + 4 KiB -> 5 extents of 1 MiB.
    st = a.ok('agent-status')
    check(st['used_bytes'] == 13 * MiB and st['metadata_bytes'] == 5 * MiB and
          st['free_bytes'] == 27 * MiB, 'accounting %r' % st)
    out['accounting'] = {k: st[k] for k in ('capacity_bytes', 'used_bytes',
                                            'metadata_bytes', 'free_bytes')}
    again = a.ok('volume-attach', volume_id='vol1', origin=ORIGIN,
                 cache_size='8M', write_policy='write_through')
    check(again['export_uri'] == r['export_uri'], 'attach not idempotent')
    dev = r['export_uri']
    data = os.urandom(256 * 1024)
    pwrite(dev, 0, data)
    for _ in range(20):
        check(pread(dev, 0, len(data)) == data, 'read back differs')
    # smq promotes what keeps being read; give it a small hot set.
    for _ in range(30):
        if a.ok('volume-show', volume_id='vol1')['cached_blocks'] >= 8:
            break
        for off in range(0, 2 * MiB, 64 * 1024):
            pread(dev, off, 64 * 1024)
    show = a.ok('volume-show', volume_id='vol1')
    for k in ('reads', 'writes', 'read_hits', 'read_misses', 'hit_ratio',
              'cached_blocks', 'dirty_blocks', 'promotions', 'demotions',
              'origin_read_bytes', 'origin_write_bytes', 'cache_write_bytes',
              'block_size'):
        check(k in show, 'volume-show lacks %s: %r' % (k, show))
    check(show['mode'] == 'writethrough' and show['block_size'] == 65536,
          show)
    out['show'] = show
    # volume-set: dmcache cannot change a policy in use
    # (doc/reference/dmcache.rst); refused, the table as it was.
    r = a.call('volume-set', volume_id='vol1', write_policy='write_back')
    check(not r['ok'] and r['errno'] == 95 and
          'dmcache engine cannot change the write policy' in r['error'], r)
    out['volume_set'] = r['error']
    # Nor its cache size: the table's cache device is fixed at attach.
    r = a.call('volume-set', volume_id='vol1', cache_size=2 * (1 << 20))
    check(not r['ok'] and r['errno'] == 95 and
          'dmcache engine cannot resize the cache of a volume in use' in
          r['error'] and 'detach it and attach it again' in r['error'], r)
    out['volume_set_size'] = r['error']
    show = a.ok('volume-show', volume_id='vol1')
    check(show['write_policy'] == 'write_through' and
          show['mode'] == 'writethrough', show)
    # Restart: the device keeps serving while no agent runs; adopted.
    a.stop()
    check(exists('fcache-vol1'), 'device removed by agent stop')
    check(pread(dev, 0, len(data)) == data, 'read without agent differs')
    a.start()
    show = a.ok('volume-show', volume_id='vol1')
    check(show['state'] == 'attached', 'not adopted: %r' % show)
    check('adopted fcache-vol1' in a.logtext(), 'log: %s' % a.logtext())
    cached = show['cached_blocks']
    # Host reboot: devices gone, agent re-creates them over its flash,
    # warm (the metadata on flash is kept).
    a.stop()
    for n in ('fcache-vol1', 'fcache-vol1-cdata', 'fcache-vol1-cmeta'):
        dmsetup('remove ' + n)
    a.start()
    show = a.ok('volume-show', volume_id='vol1')
    check(cached > 0 and show['state'] == 'attached' and
          show['cached_blocks'] == cached,
          're-create: %r (had %d cached)' % (show, cached))
    check(pread(dev, 0, len(data)) == data, 're-created device differs')
    out['recreated_warm_blocks'] = cached
    # A device with our name that we did not create is refused.  (Over
    # an origin of its own: vol1's disk under vol2 is refused before.)
    osz = blksize(ORIGIN) // 512
    dmsetup("create fcache-vol2 --table '0 %d error'" % osz)
    dmsetup("create origin-2 --table '0 %d error'" % osz)
    r = a.call('volume-attach', volume_id='vol2', origin=ORIGIN,
               cache_size='4M')
    check(not r['ok'] and r['errno'] == 17 and
          'already caches' in r['error'], r)
    r = a.call('volume-attach', volume_id='vol2',
               origin='/dev/mapper/origin-2', cache_size='4M')
    check(not r['ok'] and 'was not created' in r['error'], r)
    out['foreign_attach'] = r['error']
    dmsetup('remove origin-2')
    st = a.ok('agent-status')
    check(st['used_bytes'] == 13 * MiB, 'refused attach leaked space %r' % st)
    # ... and at start, one that replaced ours is not adopted.
    a.stop()
    for n in ('fcache-vol1',):
        dmsetup('remove ' + n)
    dmsetup("create fcache-vol1 --table '0 %d error'" % osz)
    a.start()
    show = a.ok('volume-show', volume_id='vol1')
    check(show['state'] == 'unavailable' and
          'not created by this agent' in show['error'], show)
    out['foreign_adopt'] = show['error']
    r = a.call('volume-detach', volume_id='vol1')
    check(not r['ok'], 'detach of a refused volume succeeded')
    a.stop()
    dmsetup('remove fcache-vol1')
    dmsetup('remove fcache-vol2')
    a.start()
    show = a.ok('volume-show', volume_id='vol1')
    check(show['state'] == 'attached', 'after cleanup: %r' % show)
    # Detach while open is refused; then detach frees everything.
    fd = os.open(dev, os.O_RDONLY)
    r = a.call('volume-detach', volume_id='vol1')
    os.close(fd)
    check(not r['ok'] and 'still open' in r['error'], r)
    a.ok('volume-detach', volume_id='vol1')
    check(not exists('fcache-vol1') and not exists('fcache-vol1-cdata'),
          'devices left after detach')
    st = a.ok('agent-status')
    check(st['used_bytes'] == 0 and st['volumes'] == [], st)
    a.stop()
    out['ok'] = True


def oracle(policy, ops=1500, span=24 * MiB):
    a = Agent()
    a.start()
    rng = random.Random(policy)
    model = bytearray(pread(ORIGIN, 0, span))
    r = a.ok('volume-attach', volume_id='vo', origin=ORIGIN,
             cache_size='8M', write_policy=policy)
    dev = r['export_uri']
    hot = span // 5
    reads = writes = 0
    max_dirty = 0
    for i in range(ops):
        n = rng.choice((4096, 8192, 65536, 131072))
        zone = hot if rng.random() < 0.8 else span
        off = rng.randrange(0, (zone - n) // 4096) * 4096
        if rng.random() < 0.3:
            data = rng.randbytes(n)
            pwrite(dev, off, data, sync=(i % 7 == 0))
            model[off:off + n] = data
            writes += 1
        else:
            got = pread(dev, off, n)
            check(got == bytes(model[off:off + n]),
                  'read %d+%d differs from the last acknowledged write' % (
                      off, n))
            reads += 1
        if i % 200 == 0:
            show = a.ok('volume-show', volume_id='vo')
            max_dirty = max(max_dirty, show['dirty_blocks'])
    show = a.ok('volume-show', volume_id='vo')
    max_dirty = max(max_dirty, show['dirty_blocks'])
    out.update(reads=reads, writes=writes, max_dirty=max_dirty,
               read_hits=show['read_hits'], read_misses=show['read_misses'],
               promotions=show['promotions'], mode=show['mode'])
    check(show['read_hits'] > 0, 'no hits: %r' % show)
    if policy == 'write_back':
        check(max_dirty > 0, 'write_back never held dirty blocks')
    else:
        check(max_dirty == 0, '%s held dirty blocks' % policy)
    # Restart in the middle of it all: still every byte right.
    a.stop()
    a.start()
    check(pread(dev, 0, span) == bytes(model), 'after restart: differs')
    a.ok('volume-detach', volume_id='vo')
    # Detach wrote every dirty block back: the origin alone is right.
    check(pread(ORIGIN, 0, span) == bytes(model),
          'origin after detach differs from the last acknowledged writes')
    a.stop()
    out['ok'] = True


def faults():
    # The origin is a dm device we can turn into an error target under
    # the cache, as a failing shared storage would be.
    osz = blksize(ORIGIN) // 512
    dmsetup("create origin-f --table '0 %d linear %s 0'" % (osz, ORIGIN))
    orig = '/dev/mapper/origin-f'
    a = Agent()
    a.start()
    for policy in ('write_through', 'write_back'):
        model = pread(orig, 0, 4 * MiB)
        dev = a.ok('volume-attach', volume_id='vf', origin=orig,
                   cache_size='8M', write_policy=policy)['export_uri']
        for _ in range(6):
            check(pread(dev, 0, MiB) == model[:MiB], 'warm-up read differs')
        dmsetup('suspend origin-f')
        dmsetup("reload origin-f --table '0 %d error'" % osz)
        dmsetup('resume origin-f')
        errors = ok_reads = 0
        for off in range(0, 4 * MiB, 64 * 1024):
            try:
                got = pread(dev, off, 64 * 1024)
            except OSError as e:
                check(e.errno == errno.EIO, 'error %r is not EIO' % e)
                errors += 1
                continue
            check(got == model[off:off + 64 * 1024],
                  '%s: wrong data at %d with a failing origin' % (policy, off))
            ok_reads += 1
        try:
            pwrite(dev, 3 * MiB, b'x' * 4096)
            werr = 'accepted'
        except OSError as e:
            check(e.errno == errno.EIO, 'write error %r' % e)
            werr = 'EIO'
        check(errors > 0, 'no read failed with the origin gone')
        show = a.ok('volume-show', volume_id='vf')
        out[policy] = {'eio_reads': errors, 'correct_reads': ok_reads,
                       'write': werr, 'state': show['state']}
        dmsetup('suspend origin-f')
        dmsetup("reload origin-f --table '0 %d linear %s 0'" % (osz, ORIGIN))
        dmsetup('resume origin-f')
        r = a.call('volume-detach', volume_id='vf')
        if not r['ok']:
            out[policy]['detach'] = r['error']
            # A cache the kernel failed stays until an operator acts.
            for n in ('fcache-vf', 'fcache-vf-cdata', 'fcache-vf-cmeta'):
                dmsetup('remove ' + n, check=False)
            check(False, 'detach after the origin came back: %r' % r)
    a.stop()
    dmsetup('remove origin-f')
    out['ok'] = True


def run_scenario(fn, *args):
    """Run a guest scenario and print its RESULT line.

    The line is ``out`` as the scenario left it, or with the exception
    that ended it.
    """
    try:
        fn(*args)
    except SystemExit:
        raise
    except BaseException as e:
        import traceback
        out['failed'] = 'exception: %r' % e
        out['trace'] = traceback.format_exc()[-2000:]
        diagnose()
        report(out)
        sys.exit(1)
    report(out)


def scenario(what):
    if what == 'lifecycle':
        lifecycle()
    elif what == 'oracle':
        out['policy'] = sys.argv[2]
        oracle(sys.argv[2])
    elif what == 'faults':
        faults()
    else:
        check(False, 'unknown scenario %s' % what)


if __name__ == '__main__':
    run_scenario(scenario, sys.argv[1])
