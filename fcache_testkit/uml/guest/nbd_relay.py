# SPDX-License-Identifier: Apache-2.0
"""The agent's kernel NBD relay (dmcache/dm_nbd.c) against the real kernel.

``$NBD_KDEV`` (fcache_agent/tools/nbd_kdev.c) connects a ``/dev/nbdN`` through
generic netlink to the agent's NBD server, which answers on the other end
of a socketpair from a file.  Checked, every read against an oracle:

1. O_DIRECT reads and writes of 4 KiB-128 KiB at random offsets of the
   device, then the whole device and the file itself; a flush reaches the
   relay.
2. A dm-clone whose source is that device (the shape of hybrid and
   cloudcache on dmcache): reads of unhydrated regions come through the
   relay, a partial write lands on top of the source's bytes, hydration
   copies every region, and afterwards the destination alone holds the
   clone's bytes and no read reaches the relay.
3. A clean disconnect: the tool exits 0 and the device is empty.
4. Read-only: a write fails with EPERM in the kernel.  With a dead
   connection timeout, a relay that dies (SIGKILL) leaves the device
   holding reads until a new relay reattaches (NBD_CMD_RECONFIGURE); the
   held read then completes with the right bytes.

Run by tests/functional/test_dmcache_uml.py::test_nbd_relay with nbd.ko
loaded; prints one ``RESULT {json}`` line.  Devices: $DEV_FLASH_A.
"""

import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmutil import KdevProcess, blksize, checks, dmsetup, pattern, pread, pwrite, report  # noqa

KDEV = os.environ['NBD_KDEV']
FLASH = os.environ['DEV_FLASH_A']
RT = os.environ['UML_RT']
SIZE = 8 << 20
BLOCK = 4096
REGION = 64                     # sectors: 32 KiB, a cache block
NREG = SIZE // (REGION * 512)
DATA_SECT = SIZE // 512
META_SECT = 8192

facts = {}


fail, check = checks(facts)


class Relay(KdevProcess):
    """One nbd_kdev process: a /dev/nbdN served from ``path``."""

    def __init__(self, path, *args):
        KdevProcess.__init__(self, [KDEV] + list(args) + [path], check)

    def stats(self):
        f = self.cmd('stats')
        check(f[:1] == ['STATS'], 'nbd_kdev stats: %r' % f)
        return dict(zip(f[1::2], map(int, f[2::2])))

    def disconnect(self):
        f = self.cmd('disconnect')
        rc = self.p.wait(30)
        return f, rc


def block_of(i):
    return pattern('file%d' % i, BLOCK)


def compare(dev, oracle, what):
    got = pread(dev, 0, len(oracle))
    if got != bytes(oracle):
        bad = next(i for i in range(0, len(oracle), 512)
                   if got[i:i + 512] != oracle[i:i + 512])
        fail('%s differs from the oracle at byte %d' % (what, bad))


# ---- 1. Reads and writes through the relay -------------------------------
FILE = os.path.join(RT, 'relay-backing.img')
oracle = bytearray(b''.join(block_of(i) for i in range(SIZE // BLOCK)))
with open(FILE, 'wb') as f:
    f.write(oracle)

t0 = time.monotonic()
relay = Relay(FILE, '-d', '30')
facts['connect_s'] = round(time.monotonic() - t0, 3)
dev = relay.dev
check(blksize(dev) == SIZE, '%s is %d bytes, not %d' % (dev, blksize(dev),
                                                        SIZE))
# Whatever the kernel read on its own (a partition scan at the first open)
# before the workload: the relay must serve from the moment it connects.
facts['reads_before_workload'] = relay.stats()['reads']
rnd = random.Random(36)
reads = writes = 0
for n in range(400):
    count = rnd.choice([1, 1, 2, 4, 8, 32]) * BLOCK
    off = rnd.randrange(0, (SIZE - count) // BLOCK + 1) * BLOCK
    if rnd.random() < 0.3:
        data = pattern('w%d' % n, count)
        pwrite(dev, off, data, sync=(n % 2 == 0))
        oracle[off:off + count] = data
        writes += 1
    else:
        got = pread(dev, off, count)
        check(got == bytes(oracle[off:off + count]),
              'read %d of %s at %d (%d bytes) differs from the oracle' % (
                  n, dev, off, count))
        reads += 1
fd = os.open(dev, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
compare(dev, oracle, dev)
with open(FILE, 'rb') as f:
    check(f.read() == bytes(oracle),
          'the file behind the relay differs from the oracle')
st = relay.stats()
check(st['reads'] > 0 and st['writes'] > 0, 'relay stats %r' % st)
check(st['flushes'] > 0, 'no flush reached the relay: %r' % st)
facts['io'] = {'reads': reads, 'writes': writes, 'relay': st}

# ---- 2. dm-clone whose source is the relay's device ----------------------
dmsetup("create nr-dst --table '0 %d linear %s 0'" % (DATA_SECT, FLASH))
dmsetup("create nr-clmeta --table '0 %d linear %s %d'" % (
    META_SECT, FLASH, DATA_SECT))
pwrite('/dev/mapper/nr-clmeta', 0, bytes(4096))
for r in range(NREG):
    pwrite('/dev/mapper/nr-dst', r * REGION * 512,
           pattern('garbage%d' % r, REGION * 512), sync=False)
dmsetup("create nr-clone --table '0 %d clone /dev/mapper/nr-clmeta "
        "/dev/mapper/nr-dst %s %d 1 no_hydration'" % (DATA_SECT, dev, REGION))
CL = '/dev/mapper/nr-clone'
clone_oracle = bytearray(oracle)
before = relay.stats()['reads']
for r in (3, 100, 255):
    off = r * REGION * 512
    check(pread(CL, off, 4096) == bytes(clone_oracle[off:off + 4096]),
          'the clone read of unhydrated region %d is not the source' % r)
check(relay.stats()['reads'] > before,
      'reads of unhydrated regions did not reach the relay')
# A 4 KiB write inside region 7: hydrated first, the write on top.
off = 7 * REGION * 512 + 8192
data = pattern('clone-write', 4096)
pwrite(CL, off, data)
clone_oracle[off:off + 4096] = data
dmsetup('message nr-clone 0 hydration_threshold 32')
dmsetup('message nr-clone 0 hydration_batch_size 32')
t0 = time.monotonic()
dmsetup('message nr-clone 0 enable_hydration')
while True:
    f = dmsetup('status nr-clone').stdout.split()
    hydrated, total = map(int, f[6].split('/'))
    if hydrated == total:
        break
    check(time.monotonic() - t0 < 120, 'hydration stuck at %d/%d' % (
        hydrated, total))
    time.sleep(0.05)
facts['clone_hydrated'] = {'regions': total,
                           's': round(time.monotonic() - t0, 2)}
compare(CL, clone_oracle, 'the hydrated clone')
after = relay.stats()['reads']
compare(CL, clone_oracle, 'the hydrated clone, read again')
check(relay.stats()['reads'] == after,
      'a read of the hydrated clone reached the relay')
dmsetup('remove nr-clone')
compare('/dev/mapper/nr-dst', clone_oracle,
        'the destination alone, after hydration')
dmsetup('remove nr-clmeta')
dmsetup('remove nr-dst')
with open(FILE, 'rb') as f:
    check(f.read() == bytes(oracle), 'the clone wrote to its source')

# ---- 3. A clean disconnect -----------------------------------------------
out, rc = relay.disconnect()
check(out == ['DISCONNECTED', '0'] and rc == 0,
      'disconnect: %r, rc %s' % (out, rc))
check(blksize(dev) == 0, '%s still has %d bytes after the disconnect' % (
    dev, blksize(dev)))
facts['disconnected'] = True

# ---- 4. Read-only, and a relay that dies and is replaced -----------------
ro = Relay(FILE, '-r', '-d', '30')
try:
    pwrite(ro.dev, 0, b'x' * 4096)
    facts['read_only_write'] = 'accepted'
except OSError as e:
    facts['read_only_write'] = 'refused: %s' % os.strerror(e.errno)
check(facts['read_only_write'] == 'refused: %s' % os.strerror(1),
      'a write to the read-only device: %s' % facts['read_only_write'])
check(ro.stats()['writes'] == 0, 'a write reached the read-only relay')
index = ro.dev[len('/dev/nbd'):]
ro.p.send_signal(signal.SIGKILL)
ro.p.wait(10)
out = {}


def held_read():
    try:
        out['data'] = pread(ro.dev, 5 * BLOCK, BLOCK)
    except OSError as e:
        out['errno'] = e.errno


t = threading.Thread(target=held_read, daemon=True)
t.start()
t.join(2)
check(t.is_alive(), 'with its relay dead the device did not hold a read: '
      '%r' % out)
t0 = time.monotonic()
ro2 = Relay(FILE, '-r', '-d', '30', '-a', '-i', index)
check(ro2.dev == ro.dev, 'reattached %s, not %s' % (ro2.dev, ro.dev))
t.join(30)
check(not t.is_alive(), 'the held read did not complete after reattaching')
check(out.get('data') == bytes(oracle[5 * BLOCK:6 * BLOCK]),
      'the held read returned %r' % ({k: v for k, v in out.items()
                                      if k != 'data'} or 'wrong bytes'))
facts['held_read_after_reattach_s'] = round(time.monotonic() - t0, 2)
compare(ro2.dev, oracle, 'the reattached device')
out2, rc = ro2.disconnect()
check(out2 == ['DISCONNECTED', '0'] and rc == 0,
      'disconnect after reattach: %r, rc %s' % (out2, rc))
facts['ok'] = True
report(facts)
