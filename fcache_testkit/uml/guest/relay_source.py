# SPDX-License-Identifier: Apache-2.0
"""The relay's source side (dmcache/dm_relay.c) against the real kernel.

``$RELAY_KDEV`` (fcache_agent/tools/relay_kdev.c) connects a ``/dev/nbdN``
(dmcache/dm_nbd.c) answered by the relay, whose fetches are the
migration's own (fc_migr_dest_fetch_start) over a transfer stream to a
thread playing the source: it answers each FETCH of an origin block from
a file standing for the source's frozen cache-data device, at the
source's own cache block.  The device has the destination's cache-data
layout: destination cache block c holds the origin block the map (the
restored metadata) puts there, numbered unlike the source's cache.
Checked, every read against an oracle:

1. The whole device and 200 O_DIRECT reads of 4 KiB-128 KiB, across
   cache blocks and inside them; a read of an unmapped cache block is
   zeros and fetches nothing.
2. A source that stalls: the kernel's read waits; the stream breaks and
   comes back while the fetch is held (the source forgot it, so it must be
   sent again); the source resumes; the read completes with the right
   bytes.
3. A dm-clone whose source is the device hydrates every region through
   the relay, with many fetches in flight from 4 NBD threads; afterwards
   the destination segment alone holds the oracle (the source's blocks
   where the map says, zeros elsewhere).
4. A clean disconnect.

Run by tests/functional/test_dmcache_uml.py::test_relay_source with
nbd.ko loaded; prints one ``RESULT {json}`` line.  Devices: $DEV_FLASH_A.
"""

import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmutil import KdevProcess, blksize, checks, dmsetup, pattern, pread, pwrite, report  # noqa

KDEV = os.environ['RELAY_KDEV']
FLASH = os.environ['DEV_FLASH_A']
RT = os.environ['UML_RT']
BS = 32768                      # the cache block
NB = 256                        # the destination's cache blocks: 8 MiB
SNB = 320                       # the source's
REGION = BS // 512
DATA_SECT = NB * BS // 512
META_SECT = 8192
UNMAPPED = 5                    # a cache block read alone below

facts = {}


fail, check = checks(facts)


def block_of(ob):
    """Origin block ob's data: each 4 KiB of it named apart."""
    return b''.join(pattern('o%d.%d' % (ob, k), 4096)
                    for k in range(BS // 4096))


# The source caches SNB origin blocks at random cache blocks; the
# destination maps 200 of them, renumbered (as step 2 of the design
# renumbers them hottest first), and leaves the other cache blocks
# unmapped.
rnd = random.Random(362)
src_obs = rnd.sample(range(100000), SNB)
src_of = {ob: s for s, ob in enumerate(src_obs)}
cache_file = os.path.join(RT, 'relay-source-cache.img')
with open(cache_file, 'wb') as f:
    for ob in src_obs:
        f.write(block_of(ob))
mapped = sorted(rnd.sample([c for c in range(NB) if c != UNMAPPED], 200))
dst_obs = rnd.sample(src_obs, len(mapped))
dmap = dict(zip(mapped, dst_obs))
map_file = os.path.join(RT, 'relay-map.txt')
with open(map_file, 'w') as f:
    f.write('%d\n' % NB)
    for c, ob in sorted(dmap.items()):
        f.write('%d %d %d\n' % (c, ob, src_of[ob]))
oracle = b''.join(block_of(dmap[c]) if c in dmap else bytes(BS)
                  for c in range(NB))


class Relay(KdevProcess):
    def __init__(self, *args):
        KdevProcess.__init__(self, [KDEV] + list(args), check)

    def do(self, c, answer):
        got = self.cmd(c)
        check(got == [answer], '%s: %r' % (c, got))

    def stats(self):
        f = self.cmd('stats')
        check(f[:1] == ['STATS'], 'relay_kdev stats: %r' % f)
        return dict(zip(f[1::2], map(int, f[2::2])))


def compare(dev, what):
    got = pread(dev, 0, len(oracle))
    if got != oracle:
        bad = next(i for i in range(0, len(oracle), 512)
                   if got[i:i + 512] != oracle[i:i + 512])
        fail('%s differs from the oracle at byte %d (cache block %d, %s)' % (
            what, bad, bad // BS,
            'mapped' if bad // BS in dmap else 'unmapped'))


relay = Relay('-b', str(BS), '-m', '32', cache_file, map_file)
dev = relay.dev
check(blksize(dev) == NB * BS, '%s is %d bytes, not %d' % (
    dev, blksize(dev), NB * BS))

# ---- 1. Reads through the relay ------------------------------------------
compare(dev, dev)
for n in range(200):
    count = rnd.choice([1, 2, 4, 8, 16, 32]) * 4096
    off = rnd.randrange(0, (NB * BS - count) // 4096 + 1) * 4096
    check(pread(dev, off, count) == oracle[off:off + count],
          'read %d of %s at %d (%d bytes) differs from the oracle' % (
              n, dev, off, count))
before = relay.stats()
check(pread(dev, UNMAPPED * BS, BS) == bytes(BS),
      'unmapped cache block %d is not zeros' % UNMAPPED)
after = relay.stats()
check(after['reads'] == before['reads'] + 1 and
      after['fetched'] == before['fetched'] and
      after['zero_blocks'] == before['zero_blocks'] + 1,
      'the read of an unmapped block: %r then %r' % (before, after))
check(after['fetch_errors'] == 0, 'fetch errors: %r' % after)
facts['reads'] = after

# ---- 2. A source that stalls, a stream that breaks and comes back ---------
c = mapped[17]
out = {}


def held_read():
    t0 = time.monotonic()
    try:
        out['data'] = pread(dev, c * BS, BS)
    except OSError as e:
        out['errno'] = e.errno
    out['s'] = time.monotonic() - t0


relay.do('stall', 'STALLED')
answered = relay.stats()['answered']
t = threading.Thread(target=held_read, daemon=True)
t.start()
t.join(1)
check(t.is_alive(), 'with the source stalled the read did not wait: %r' % (
    {k: v for k, v in out.items() if k != 'data'}))
relay.do('drop', 'DROPPED')
t.join(0.5)
check(t.is_alive(), 'with no stream the read did not wait')
relay.do('reconnect', 'RECONNECTED')
t.join(0.5)
check(t.is_alive(), 'the source, still stalled, answered')
relay.do('resume', 'RESUMED')
t.join(20)
check(not t.is_alive(), 'the read did not complete once the source resumed')
check(out.get('data') == oracle[c * BS:(c + 1) * BS],
      'the read held through the stall returned %r' % (
          {k: v for k, v in out.items() if k != 'data'} or 'wrong bytes'))
st = relay.stats()
check(st['answered'] == answered + 1 and st['fetch_errors'] == 0,
      'the held fetch was not answered once, after the reconnect: %r' % st)
facts['held_read_s'] = round(out['s'], 2)

# ---- 3. dm-clone hydrating through the relay ------------------------------
dmsetup("create rs-dst --table '0 %d linear %s 0'" % (DATA_SECT, FLASH))
dmsetup("create rs-clmeta --table '0 %d linear %s %d'" % (
    META_SECT, FLASH, DATA_SECT))
pwrite('/dev/mapper/rs-clmeta', 0, bytes(4096))
for r in range(NB):
    pwrite('/dev/mapper/rs-dst', r * BS, pattern('garbage%d' % r, BS),
           sync=False)
dmsetup("create rs-clone --table '0 %d clone /dev/mapper/rs-clmeta "
        "/dev/mapper/rs-dst %s %d 1 no_hydration'" % (DATA_SECT, dev, REGION))
CL = '/dev/mapper/rs-clone'
dmsetup('message rs-clone 0 hydration_threshold 32')
dmsetup('message rs-clone 0 hydration_batch_size 32')
t0 = time.monotonic()
dmsetup('message rs-clone 0 enable_hydration')
while True:
    f = dmsetup('status rs-clone').stdout.split()
    hydrated, total = map(int, f[6].split('/'))
    if hydrated == total:
        break
    check(time.monotonic() - t0 < 120, 'hydration stuck at %d/%d' % (
        hydrated, total))
    time.sleep(0.05)
st = relay.stats()
facts['clone_hydrated'] = {'regions': total,
                           's': round(time.monotonic() - t0, 2),
                           'inflight_peak': st['inflight_peak']}
check(st['fetch_errors'] == 0, 'fetch errors while hydrating: %r' % st)
check(1 < st['inflight_peak'] <= 32,
      'fetches in flight at most: %d' % st['inflight_peak'])
compare(CL, 'the hydrated clone')
reads = relay.stats()['reads']
compare(CL, 'the hydrated clone, read again')
check(relay.stats()['reads'] == reads,
      'a read of the hydrated clone reached the relay')
dmsetup('remove rs-clone')
compare('/dev/mapper/rs-dst', 'the destination alone, after hydration')
dmsetup('remove rs-clmeta')
dmsetup('remove rs-dst')
facts['relay'] = relay.stats()

# ---- 4. A clean disconnect -----------------------------------------------
got = relay.cmd('disconnect')
rc = relay.p.wait(30)
check(got == ['DISCONNECTED', '0'] and rc == 0,
      'disconnect: %r, rc %s' % (got, rc))
check(blksize(dev) == 0, '%s still has %d bytes after the disconnect' % (
    dev, blksize(dev)))
facts['ok'] = True
report(facts)
