# SPDX-License-Identifier: Apache-2.0
"""Check, inside UML, what dm-clone over the kernel NBD client does.

The design of hybrid and cloudcache on dmcache (doc/reference/dmcache.rst,
"hybrid and cloudcache on dmcache (design)") stacks, on the destination, a
dm-cache whose cache-data device is a dm-clone: destination the local
flash segment, source ``/dev/nbdN``, which the destination agent feeds itself
over a socketpair with the source host's frozen cache-data device.  This
script is that stack with a userspace NBD server standing in for the
agent's relay (the kernel side of the NBD transmission protocol, served on
one end of a socketpair whose other end the kernel holds), and checks each
kernel behaviour the design rests on.

Run by tests/functional/test_dmcache_uml.py::test_clone_over_nbd_facts with
the nbd module loaded; prints one ``RESULT {json}`` line and exits non-zero
on the first fact that does not hold.  Devices: $DEV_ORIGIN, $DEV_FLASH_A.
"""

import fcntl
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmutil import (blksize, cache_status, checks, dmsetup, pattern, pread,  # noqa
                    pwrite, report, sh)

ORIGIN = os.environ['DEV_ORIGIN']
FLASH = os.environ['DEV_FLASH_A']
RT = os.environ['UML_RT']
BS = 64                        # sectors: the cache block = the clone region
BSB = BS * 512
NREG = 256                     # 8 MiB of cache data: 256 blocks / regions
DATA_SECT = NREG * BS
META_SECT = 8192               # 4 MiB
# Carved from the flash device as the engine would: the source host's
# frozen cache data, the destination's segment, dm-clone's and dm-cache's
# metadata.
SRC_OFF, DST_OFF = 0, DATA_SECT
CLMETA_OFF, CMETA_OFF = 2 * DATA_SECT, 2 * DATA_SECT + META_SECT

# include/uapi/linux/nbd.h: _IO(0xab, n), big-endian wire format.
NBD_SET_SOCK, NBD_SET_BLKSIZE, NBD_DO_IT = 0xab00, 0xab01, 0xab03
NBD_SET_SIZE_BLOCKS, NBD_SET_TIMEOUT, NBD_SET_FLAGS = 0xab07, 0xab09, 0xab0a
NBD_FLAG_HAS_FLAGS, NBD_FLAG_READ_ONLY = 1 << 0, 1 << 1
REQUEST_MAGIC, REPLY_MAGIC = 0x25609513, 0x67446698
REQ = struct.Struct('>IIQQI')          # magic, type, handle, offset, length
REPLY = struct.Struct('>IIQ')          # magic, error, handle
CMD_READ, CMD_WRITE, CMD_DISC = 0, 1, 2
EPERM = 1

facts = {'kernel': os.uname().release}


fail, check = checks(facts)


def recv_all(s, n):
    buf = b''
    while len(buf) < n:
        try:
            got = s.recv(n - len(buf))
        except OSError:            # our end was closed under us
            return None
        if not got:
            return None
        buf += got
    return buf


class NbdServer(object):
    """The kernel's NBD device fed over a socketpair from ``backing``.

    What the agent's relay will do, minus the network: the kernel holds
    one end (NBD_SET_SOCK), a thread blocks in NBD_DO_IT for the device's
    life, another answers each request.  The device is exported read-only
    (the kernel refuses writes before they reach the socket); a write that
    arrives anyway is answered EPERM and counted.  ``hold`` makes the
    server stop answering (a source that went quiet); ``close`` shuts its
    end (the agent gone).  ``delay`` answers each read that many seconds
    late, reads overlapping (a network round trip; replies may come out
    of order, as the protocol allows: the handle matches them).
    """

    def __init__(self, nbd, backing, size, timeout=0, netlink=None):
        self.nbd = nbd
        self.backing = os.open(backing, os.O_RDONLY)
        self.reads = []            # (offset, length) in arrival order
        self.writes = 0
        self.hold = threading.Event()
        self.lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.delay = 0.0
        self.kside, self.mine = socket.socketpair()
        if netlink is not None:
            # The netlink interface: no thread blocks in the kernel, and a
            # dead socket can be replaced (NBD_CMD_RECONFIGURE).
            netlink.connect(int(nbd[len('/dev/nbd'):]), size, timeout,
                            self.kside.fileno())
        else:
            self.fd = os.open(nbd, os.O_RDWR)
            fcntl.ioctl(self.fd, NBD_SET_BLKSIZE, 4096)
            fcntl.ioctl(self.fd, NBD_SET_SIZE_BLOCKS, size // 4096)
            fcntl.ioctl(self.fd, NBD_SET_FLAGS,
                        NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY)
            fcntl.ioctl(self.fd, NBD_SET_TIMEOUT, timeout)
            fcntl.ioctl(self.fd, NBD_SET_SOCK, self.kside.fileno())
            threading.Thread(target=self._do_it, daemon=True).start()
        threading.Thread(target=self._serve, daemon=True).start()
        # The device is live once its size shows.
        for _ in range(100):
            if blksize(nbd) == size:
                break
            time.sleep(0.05)
        check(blksize(nbd) == size, '%s did not come up' % nbd)

    def replace_socket(self, netlink):
        """A new relay end for a dead one, as a restarted agent would."""
        self.kside, self.mine = socket.socketpair()
        netlink.reconfigure(int(self.nbd[len('/dev/nbd'):]),
                            self.kside.fileno())
        threading.Thread(target=self._serve, daemon=True).start()

    def _do_it(self):
        # Returns when the device is disconnected or its socket dies.
        try:
            fcntl.ioctl(self.fd, NBD_DO_IT)
        except OSError:
            pass

    def _serve(self):
        s = mine = self.mine
        while True:
            hdr = recv_all(s, REQ.size)
            if hdr is None:
                return
            magic, typ, handle, off, length = REQ.unpack(hdr)
            if magic != REQUEST_MAGIC:
                fail('the kernel sent a request with magic %s' % hex(magic))
            cmd = typ & 0xffff
            if cmd == CMD_DISC:
                return
            while self.hold.is_set():
                time.sleep(0.05)
            if cmd == CMD_READ:
                with self.lock:
                    self.reads.append((off, length))
                msg = REPLY.pack(REPLY_MAGIC, 0, handle) + os.pread(
                    self.backing, length, off)
                if self.delay:
                    threading.Timer(self.delay, self._send,
                                    (msg, mine)).start()
                elif not self._send(msg, mine):
                    return
            else:
                if cmd == CMD_WRITE:
                    recv_all(s, length)
                    with self.lock:
                        self.writes += 1
                err = EPERM if cmd == CMD_WRITE else 0
                self._send(REPLY.pack(REPLY_MAGIC, err, handle), mine)

    def _send(self, msg, sock):
        try:
            with self.send_lock:
                sock.sendall(msg)
            return True
        except OSError:
            return False

    def served(self):
        with self.lock:
            return len(self.reads)

    def reads_since(self, n):
        with self.lock:
            return self.reads[n:]

    def close(self):
        """The relay's end goes, as when the agent dies."""
        self.mine.shutdown(socket.SHUT_RDWR)
        self.mine.close()


class NbdNetlink(object):
    """The kernel NBD client's generic-netlink interface (nbd-netlink.h)."""

    NLM_F_REQUEST, NLM_F_ACK, NLMSG_ERROR = 1, 4, 2
    GENL_ID_CTRL, CTRL_CMD_GETFAMILY = 0x10, 3
    CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME = 1, 2
    CMD_CONNECT, CMD_RECONFIGURE = 1, 3
    A_INDEX, A_SIZE, A_BLOCK, A_TIMEOUT, A_SFLAGS = 1, 2, 3, 4, 5
    A_SOCKETS, A_DEAD_CONN_TIMEOUT = 7, 8
    SOCK_ITEM, SOCK_FD = 1, 1
    NLA_F_NESTED = 0x8000

    def __init__(self, dead_conn_timeout):
        self.dead = dead_conn_timeout
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)
        self.s.bind((0, 0))
        self.seq = 0
        reply = self._req(self.GENL_ID_CTRL, self.CTRL_CMD_GETFAMILY,
                          self._attr(self.CTRL_ATTR_FAMILY_NAME, b'nbd\0'))
        attrs = self._attrs(reply[20:])
        self.family = struct.unpack(
            '<H', attrs[self.CTRL_ATTR_FAMILY_ID][:2])[0]

    @staticmethod
    def _attr(typ, payload):
        a = struct.pack('<HH', 4 + len(payload), typ) + payload
        return a + b'\0' * (-len(a) % 4)

    @staticmethod
    def _attrs(buf):
        out = {}
        while len(buf) >= 4:
            ln, typ = struct.unpack('<HH', buf[:4])
            out[typ & 0x3fff] = buf[4:ln]
            buf = buf[(ln + 3) & ~3:]
        return out

    def _req(self, family, cmd, attrs):
        self.seq += 1
        body = struct.pack('<BBH', cmd, 1, 0) + attrs
        msg = struct.pack('<IHHII', 16 + len(body), family,
                          self.NLM_F_REQUEST | self.NLM_F_ACK, self.seq,
                          0) + body
        self.s.send(msg)
        data = None
        while True:
            buf = self.s.recv(65536)
            while buf:
                ln, typ = struct.unpack('<IH', buf[:6])
                if typ == self.NLMSG_ERROR:
                    err = struct.unpack('<i', buf[16:20])[0]
                    if err:
                        raise OSError(-err, os.strerror(-err))
                    return data
                data = buf[:ln]
                buf = buf[(ln + 3) & ~3:]

    def _sockets(self, fd):
        item = self._attr(self.SOCK_FD, struct.pack('<I', fd))
        nested = self._attr(self.SOCK_ITEM | self.NLA_F_NESTED, item)
        return self._attr(self.A_SOCKETS | self.NLA_F_NESTED, nested)

    def connect(self, index, size, timeout, fd):
        q = struct.Struct('<Q').pack
        self._req(self.family, self.CMD_CONNECT, b''.join([
            self._attr(self.A_INDEX, struct.pack('<I', index)),
            self._attr(self.A_SIZE, q(size)),
            self._attr(self.A_BLOCK, q(4096)),
            self._attr(self.A_TIMEOUT, q(timeout)),
            self._attr(self.A_SFLAGS,
                       q(NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY)),
            self._attr(self.A_DEAD_CONN_TIMEOUT, q(self.dead)),
            self._sockets(fd)]))

    def reconfigure(self, index, fd):
        self._req(self.family, self.CMD_RECONFIGURE, b''.join([
            self._attr(self.A_INDEX, struct.pack('<I', index)),
            self._sockets(fd)]))


def linear(name, off, sect, dev=FLASH):
    dmsetup("create %s --table '0 %d linear %s %d'" % (name, sect, dev, off))


def zero(dev, n=4096):
    sh('dd if=/dev/zero of=%s bs=%d count=1 oflag=direct status=none' % (
        dev, n))


def clone_status(name):
    # <md bs> <used>/<total> <region> <hydrated>/<total> <hydrating>
    # <#features> <features>* <#core args> <core args>* <mode>
    f = dmsetup('status ' + name).stdout.split()
    h, t = f[6].split('/')
    return {'hydrated': int(h), 'total': int(t), 'hydrating': int(f[7]),
            'mode': f[-1], 'raw': ' '.join(f[3:])}


def clone(name, src, feats=('no_hydration',), core=()):
    args = list(feats)
    table = ('0 %d clone /dev/mapper/kc-clmeta /dev/mapper/kc-dst %s %d %d '
             '%s' % (DATA_SECT, src, BS, len(args), ' '.join(args)))
    if core:
        table += ' %d %s' % (len(core), ' '.join(core))
    dmsetup("create %s --table '%s'" % (name, table))


def fresh_destination():
    """The destination segment holds garbage and dm-clone's metadata is new."""
    for r in range(NREG):
        pwrite('/dev/mapper/kc-dst', r * BSB, pattern('garbage%d' % r, BSB),
               sync=False)
    zero('/dev/mapper/kc-clmeta')


def src_block(r):
    return pattern('src%d' % r, BSB)


def timed_read(dev, off, n, wait):
    """pread in a thread: ('ok', bytes) / ('error', errno) / ('blocked',)."""
    out = {}

    def go():
        t0 = time.monotonic()
        try:
            out['data'] = pread(dev, off, n)
        except OSError as e:
            out['errno'] = e.errno
        out['s'] = time.monotonic() - t0

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(wait)
    return t, out


def hydrate_all(name, limit=120.0):
    t0 = time.monotonic()
    dmsetup('message %s 0 enable_hydration' % name)
    while time.monotonic() - t0 < limit:
        st = clone_status(name)
        if st['hydrated'] == st['total']:
            return time.monotonic() - t0
        time.sleep(0.05)
    fail('hydration did not finish in %d s: %s' % (limit, clone_status(
        name)['raw']))


# ---- Devices ------------------------------------------------------------
linear('kc-src', SRC_OFF, DATA_SECT)
linear('kc-dst', DST_OFF, DATA_SECT)
linear('kc-clmeta', CLMETA_OFF, META_SECT)
linear('kc-cmeta', CMETA_OFF, META_SECT)
for r in range(NREG):
    pwrite('/dev/mapper/kc-src', r * BSB, src_block(r), sync=False)
sh('sync')
SRC = '/dev/mapper/kc-src'
SIZE = DATA_SECT * 512

# ---- 1. The NBD device: a socketpair served from userspace --------------
srv = NbdServer('/dev/nbd0', SRC, SIZE)
time.sleep(0.3)                   # the partition scan's reads
n0 = srv.served()
check(pread('/dev/nbd0', 5 * BSB, BSB) == src_block(5),
      '/dev/nbd0 does not return the source bytes')
check(srv.served() > n0, 'a read of /dev/nbd0 did not reach the server')
try:
    pwrite('/dev/nbd0', 0, b'x' * 4096)
    facts['nbd_write_read_only'] = 'accepted'
except OSError as e:
    facts['nbd_write_read_only'] = 'refused: %s' % os.strerror(e.errno)
check(srv.writes == 0, 'a write on the read-only NBD device reached the '
      'server')
check(facts['nbd_write_read_only'].startswith('refused'),
      'a write on the read-only NBD device succeeded')

# ---- 2. dm-clone over it, no_hydration ----------------------------------
fresh_destination()
clone('kc-clone', '/dev/nbd0')
CL = '/dev/mapper/kc-clone'
st = clone_status('kc-clone')
check(st['hydrated'] == 0 and st['total'] == NREG, 'fresh clone: %s' % st)
facts['clone_status_fresh'] = st['raw']

# A read of an unhydrated region reaches the server, returns the source.
n = srv.served()
check(pread(CL, 3 * BSB, BSB) == src_block(3),
      'unhydrated read did not return the source bytes')
got = srv.reads_since(n)
check(got and all(3 * BSB <= o < 4 * BSB for o, _ in got),
      'unhydrated read of region 3 was not served by the source: %r' % got)
facts['unhydrated_read_served_by_source'] = got

# Repeated reads of an unhydrated region do not hydrate it.
for _ in range(20):
    pread(CL, 4 * BSB, BSB)
time.sleep(0.5)
st = clone_status('kc-clone')
facts['reads_hydrate_region'] = st['hydrated'] != 0
check(st['hydrated'] == 0, 'reads hydrated a region: %s' % st['raw'])

# A whole-region write does not reach the server and hydrates the region.
n = srv.served()
pwrite(CL, 10 * BSB, pattern('whole10', BSB))
check(srv.served() == n, 'a whole-region write read the source: %r' %
      srv.reads_since(n))
check(clone_status('kc-clone')['hydrated'] == 1,
      'a whole-region write did not mark the region hydrated')
check(pread(CL, 10 * BSB, BSB) == pattern('whole10', BSB) and
      srv.served() == n, 'a written region is read from the source')
facts['whole_region_write_reads_source'] = False

# A partial write hydrates the region first: one read of the whole region.
n = srv.served()
part = pattern('part11', 4096)
pwrite(CL, 11 * BSB + 8192, part)
got = srv.reads_since(n)
check(sum(ln for _, ln in got) == BSB and
      all(11 * BSB <= o < 12 * BSB for o, _ in got),
      'a partial write did not read its region from the source: %r' % got)
want11 = bytearray(src_block(11))
want11[8192:8192 + 4096] = part
check(pread(CL, 11 * BSB, BSB) == bytes(want11),
      'partial write: not the source with the write on top')
facts['partial_write_hydrates_region'] = got

# ---- 3. Background hydration: pacing, then the destination alone --------
d = hydrate_all('kc-clone')
facts['hydration_table_after_enable'] = dmsetup(
    'table kc-clone').stdout.split(None, 3)[3].strip()
n = srv.served()
want = [src_block(r) for r in range(NREG)]
want[10] = pattern('whole10', BSB)
want[11] = bytes(want11)
for r in range(NREG):
    check(pread(CL, r * BSB, BSB) == want[r],
          'hydrated clone: region %d differs' % r)
check(srv.served() == n, 'a read after full hydration reached the source')
facts['reads_after_hydration_reach_source'] = False
dmsetup('remove kc-clone')
linear('kc-plain', DST_OFF, DATA_SECT)
for r in range(NREG):
    check(pread('/dev/mapper/kc-plain', r * BSB, BSB) == want[r],
          'destination segment alone: region %d differs' % r)
dmsetup('remove kc-plain')
facts['destination_alone_holds_everything'] = True

# Pacing: regions per second with the defaults (one region in flight, one
# per copy) and with 32 in flight batched, against an instant source and
# one that answers 10 ms late (a network round trip).
pacing = {}
for delay in (0.0, 0.01):
    for core in ((), ('hydration_threshold', '32',
                      'hydration_batch_size', '32')):
        fresh_destination()
        clone('kc-clone', '/dev/nbd0', core=core)
        srv.delay = delay
        n = srv.served()
        d = hydrate_all('kc-clone')
        srv.delay = 0.0
        got = srv.reads_since(n)
        sizes = sorted(set(ln for _, ln in got))
        if not core and not delay:
            # One region at a time: the order dm-clone walks the regions
            # in, which the relay's block map turns into hottest first.
            offs = [o for o, _ in got]
            check(offs == sorted(offs) and len(offs) == NREG,
                  'hydration did not walk regions in ascending order: %r'
                  % offs[:20])
            facts['hydration_order'] = 'ascending region number'
        pacing['%s, %d ms' % ('threshold 32 batch 32' if core else
                              'defaults', delay * 1000)] = {
            'seconds': round(d, 2), 'regions_per_s': round(NREG / d, 1),
            'nbd_read_sizes': sizes}
        for r in range(0, NREG, 17):
            check(pread(CL, r * BSB, BSB) == src_block(r),
                  'hydration %r: region %d differs' % (core, r))
        dmsetup('remove kc-clone')
facts['hydration_pacing'] = pacing
check(pacing['threshold 32 batch 32, 10 ms']['regions_per_s'] >
      2 * pacing['defaults, 10 ms']['regions_per_s'],
      'more regions in flight did not hydrate faster over a slow source')

# Both knobs change at run time, by message.
fresh_destination()
clone('kc-clone', '/dev/nbd0')
dmsetup('message kc-clone 0 hydration_threshold 8')
dmsetup('message kc-clone 0 hydration_batch_size 4')
st = clone_status('kc-clone')
check('hydration_threshold 8' in st['raw'] and
      'hydration_batch_size 4' in st['raw'],
      'hydration messages not in the status: %s' % st['raw'])
facts['hydration_knobs_by_message'] = st['raw']
dmsetup('remove kc-clone')

# Pacing by toggling: disable_hydration stops the copy once the copies in
# flight are done.
fresh_destination()
clone('kc-clone', '/dev/nbd0')
srv.delay = 0.01
dmsetup('message kc-clone 0 enable_hydration')
time.sleep(0.5)
dmsetup('message kc-clone 0 disable_hydration')
time.sleep(0.2)
h1 = clone_status('kc-clone')['hydrated']
time.sleep(1.0)
h2 = clone_status('kc-clone')['hydrated']
srv.delay = 0.0
facts['disable_hydration_stops'] = {'after_0.5s': h1, 'one_s_later': h2}
check(0 < h1 < NREG and h2 == h1,
      'disable_hydration did not stop the copy: %d then %d' % (h1, h2))
dmsetup('remove kc-clone')

# ---- 4. The destination stack: dm-cache whose cache data is the clone ---
# The source's cache: cache block cb holds origin block 40+cb; blocks 0-3
# dirty (the origin holds an older copy), 4-7 clean (the origin agrees).
MAPPED = 8
osz = blksize(ORIGIN) // 512
for cb in range(MAPPED):
    ob = 40 + cb
    pwrite(SRC, cb * BSB, pattern('cached%d' % ob, BSB), sync=False)
    pwrite(ORIGIN, ob * BSB, pattern(('stale%d' if cb < 4 else 'cached%d') %
                                     ob, BSB), sync=False)
sh('sync')
xml = ['<superblock uuid="" block_size="%d" nr_cache_blocks="%d" '
       'policy="smq" hint_width="4">' % (BS, NREG), '  <mappings>']
for cb in range(MAPPED):
    xml.append('    <mapping cache_block="%d" origin_block="%d" '
               'dirty="%s"/>' % (cb, 40 + cb, 'true' if cb < 4 else 'false'))
xml += ['  </mappings>', '</superblock>', '']
with open(RT + '/restore.xml', 'w') as f:
    f.write('\n'.join(xml))
zero('/dev/mapper/kc-cmeta')
sh('cache_restore -q -i %s/restore.xml -o /dev/mapper/kc-cmeta '
   '--metadata-version 1' % RT)
fresh_destination()
clone('kc-clone', '/dev/nbd0')


def cache_table(policy):
    return ('0 %d cache /dev/mapper/kc-cmeta %s %s %d 1 writeback %s 0' % (
        osz, CL, ORIGIN, BS, policy))


n_create = srv.served()
t0 = time.monotonic()
dmsetup("create kc-cache --table '%s'" % cache_table('smq'))
st = cache_status('kc-cache')
check(st['used'] == MAPPED, 'restored cache: %s' % st['raw'])
# smq writes dirty blocks back as soon as the cache is idle: each one is
# read through the clone, i.e. from the source's frozen cache data.
while time.monotonic() - t0 < 10 and not all(
        pread(ORIGIN, ob * BSB, BSB) == pattern('cached%d' % ob, BSB)
        for ob in range(40, 44)):
    time.sleep(0.05)
wb = srv.reads_since(n_create)
check(all(pread(ORIGIN, ob * BSB, BSB) == pattern('cached%d' % ob, BSB)
          for ob in range(40, 44)),
      'restored dirty blocks were not written back to the origin in 10 s')
check(wb and all(o < 4 * BSB for o, _ in wb) and
      sum(ln for _, ln in wb) == 4 * BSB,
      'the writeback did not read exactly the dirty blocks from the source: '
      '%r' % wb)
facts['restored_dirty_written_back'] = {
    'seconds': round(time.monotonic() - t0, 2), 'source_reads': wb,
    'status_dirty_at_create': st['dirty']}
n = srv.served()
for cb in range(MAPPED):
    ob = 40 + cb
    check(pread('/dev/mapper/kc-cache', ob * BSB, BSB) ==
          pattern('cached%d' % ob, BSB),
          'cache over the clone: origin block %d is not the source cache\'s'
          % ob)
got = srv.reads_since(n)
check(len(got) >= MAPPED, 'mapped reads did not reach the source: %r' % got)
facts['cache_over_clone_reads'] = {'hits': cache_status(
    'kc-cache')['read_hits'], 'source_reads': len(got)}
# A whole-block write to a cached block: dm-cache writes the whole block to
# the clone, which overwrites the region without reading the source.
n = srv.served()
pwrite('/dev/mapper/kc-cache', 45 * BSB, pattern('vm45', BSB))
check(srv.served() == n, 'a whole-block write hit read the source')
check(pread('/dev/mapper/kc-cache', 45 * BSB, BSB) == pattern('vm45', BSB),
      'write hit not read back')
# The cleaner writes the dirty blocks back: dm-cache reads them through
# the clone, from the source.
dmsetup('suspend kc-cache')
dmsetup("reload kc-cache --table '%s'" % cache_table('cleaner'))
dmsetup('resume kc-cache')


def origin_ok():
    return all(pread(ORIGIN, ob * BSB, BSB) == pattern(
        'vm45' if ob == 45 else 'cached%d' % ob, BSB)
        for ob in range(40, 40 + MAPPED))


for _ in range(100):
    if cache_status('kc-cache')['dirty'] == 0 and origin_ok():
        break
    time.sleep(0.1)
facts['cleaner_status'] = cache_status('kc-cache')['raw']
check(cache_status('kc-cache')['dirty'] == 0, 'cleaner did not drain')
for cb in range(MAPPED):
    ob = 40 + cb
    want_ob = pattern('vm45' if ob == 45 else 'cached%d' % ob, BSB)
    check(pread(ORIGIN, ob * BSB, BSB) == want_ob,
          'origin block %d after the cleaner: wrong bytes' % ob)
facts['origin_current_after_cleaner'] = MAPPED
dmsetup('remove kc-cache')
dmsetup('remove kc-clone')

# ---- 5. A source that stops answering, or goes ---------------------------
# Timeout 0 (the default): a read waits for as long as the server is quiet
# and completes when it answers again.
fresh_destination()
clone('kc-clone', '/dev/nbd0')
srv.hold.set()
t, out = timed_read(CL, 20 * BSB, BSB, 3.0)
facts['quiet_source_timeout0'] = 'blocked 3 s' if t.is_alive() else out
check(t.is_alive(), 'with NBD timeout 0 a read of a quiet source ended: %r'
      % out)
srv.hold.clear()
t.join(10)
check(not t.is_alive() and out.get('data') == src_block(20),
      'the held read did not complete with the source bytes: %r' % (
          {k: v for k, v in out.items() if k != 'data'}))
facts['quiet_source_timeout0'] += ', completed when answered'
dmsetup('remove kc-clone')

# Timeout 2 s: the request fails with EIO and the connection is dead.
srv1 = NbdServer('/dev/nbd1', SRC, SIZE, timeout=2)
fresh_destination()
clone('kc-clone', '/dev/nbd1')
pread(CL, 0, BSB)
srv1.hold.set()
t, out = timed_read(CL, 21 * BSB, BSB, 30.0)
check(not t.is_alive() and 'errno' in out,
      'with NBD timeout 2 a read of a quiet source did not fail: %r' % out)
facts['quiet_source_timeout2'] = {'errno': os.strerror(out['errno']),
                                  'seconds': round(out['s'], 1)}
srv1.hold.clear()
t, out = timed_read(CL, 22 * BSB, BSB, 10.0)
facts['after_timeout_next_read'] = (
    'blocked' if t.is_alive() else
    ('ok' if 'data' in out else os.strerror(out['errno'])))
st = clone_status('kc-clone')
facts['clone_mode_after_source_eio'] = st['mode']

# ---- 6. The clone's source replaced by a table reload -------------------
# An agent that restarts creates a new NBD device; the clone keeps its
# hydration bitmap (its metadata) and takes the new source.
pwrite(CL, 30 * BSB, pattern('kept30', BSB))
h_before = clone_status('kc-clone')['hydrated']
srv2 = NbdServer('/dev/nbd2', SRC, SIZE)
table = dmsetup('table kc-clone').stdout.split()
dev1 = table[5]
table[5] = '/dev/nbd2'
dmsetup('suspend kc-clone')
dmsetup("reload kc-clone --table '%s'" % ' '.join(table))
dmsetup('resume kc-clone')
st = clone_status('kc-clone')
n = srv2.served()
check(pread(CL, 23 * BSB, BSB) == src_block(23),
      'after the source swap an unhydrated read is wrong')
check(srv2.served() > n, 'after the source swap the new source was not read')
check(pread(CL, 30 * BSB, BSB) == pattern('kept30', BSB),
      'after the source swap a hydrated region lost its write')
check(st['hydrated'] == h_before, 'the reload lost the hydration bitmap: '
      '%d -> %d' % (h_before, st['hydrated']))
facts['source_swapped_by_reload'] = {'from': dev1, 'to': '/dev/nbd2',
                                     'hydrated_kept': st['hydrated'],
                                     'mode': st['mode']}
# The relay's end closed (the agent died): what a read then gets.
srv2.close()
t, out = timed_read(CL, 24 * BSB, BSB, 30.0)
facts['source_socket_closed_read'] = (
    'blocked 30 s' if t.is_alive() else
    ('ok' if 'data' in out else '%s after %.1f s' % (
        os.strerror(out['errno']), out['s'])))
check(not t.is_alive() and 'errno' in out,
      'a read through a closed relay did not fail: %r' % out)
dmsetup('remove kc-clone')

# ---- 7. A new relay socket for a dead one, through netlink --------------
# Set up through netlink with a dead-connection timeout, the device holds
# the requests of a socket that closed (the agent died) until a new one is
# attached with NBD_CMD_RECONFIGURE (the agent restarted), instead of
# failing them.
nl = NbdNetlink(dead_conn_timeout=30)
srv3 = NbdServer('/dev/nbd3', SRC, SIZE, netlink=nl)
fresh_destination()
clone('kc-clone', '/dev/nbd3')
check(pread(CL, 12 * BSB, BSB) == src_block(12), 'netlink nbd: wrong bytes')
srv3.close()
t, out = timed_read(CL, 25 * BSB, BSB, 3.0)
held = t.is_alive()
facts['dead_socket_with_dead_conn_timeout'] = (
    'read held 3 s' if held else out)
check(held, 'with dead_conn_timeout a read through a closed relay ended: '
      '%r' % ({k: v for k, v in out.items() if k != 'data'},))
n = srv3.served()
t0 = time.monotonic()
srv3.replace_socket(nl)
t.join(20)
check(not t.is_alive() and out.get('data') == src_block(25),
      'after NBD_CMD_RECONFIGURE the held read did not complete with the '
      'source bytes: %r' % ({k: v for k, v in out.items() if k != 'data'},))
check(srv3.served() > n, 'the held read was not served by the new socket')
check(pread(CL, 26 * BSB, BSB) == src_block(26),
      'after NBD_CMD_RECONFIGURE a new read is wrong')
facts['reconfigure_resumes_held_reads'] = {
    'seconds_after_reconfigure': round(time.monotonic() - t0, 2)}

# The agent dies with a read in flight (sent to it, not answered): the
# kernel sends it again on the new socket -- when the request's timer
# fires (NBD timeout 0 leaves the block layer's default).
srv3.hold.set()
n = srv3.served()
t, out = timed_read(CL, 27 * BSB, BSB, 1.0)
check(t.is_alive(), 'a read the relay holds ended: %r' % out)
srv3.close()
srv3.hold.clear()
time.sleep(0.5)
t0 = time.monotonic()
srv3.replace_socket(nl)
t.join(90)
facts['inflight_read_after_reconfigure'] = (
    'blocked 90 s' if t.is_alive() else
    'ok after %.1f s' % (time.monotonic() - t0) if out.get('data') ==
    src_block(27) else {k: v for k, v in out.items() if k != 'data'})
check(not t.is_alive() and out.get('data') == src_block(27),
      'a read in flight when the relay died did not complete on the new '
      'socket: %r' % facts['inflight_read_after_reconfigure'])
dmsetup('remove kc-clone')

facts['ok'] = True
report(facts)
sys.stdout.flush()
os._exit(0)
