# SPDX-License-Identifier: Apache-2.0
"""Malformed NBD traffic: a clear error (or a dropped connection), and nothing
else changes.

After every bad request the test checks that the agent still runs, that a
client connected before keeps working on its own connection, that a new
client can connect, and that the volume's data is exactly what it was
(every block compared with the oracle).
"""

import errno as errno_mod
import os
import socket
import struct
import time
from urllib import parse

import nbd
import pytest

from fcache_testkit import oracle as om

MiB = 1 << 20
BS = 4096
SIZE = 8 * MiB

NBDMAGIC = 0x4e42444d41474943
IHAVEOPT = 0x49484156454F5054
REP_MAGIC = 0x0003e889045565a9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_GO = 7
REP_ACK = 1
REP_INFO = 3
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM = 0, 1, 2, 3, 4
EINVAL, ENOSPC = 22, 28


def recv_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError('connection closed after %d of %d bytes' %
                           (len(buf), n))
        buf += chunk
    return bytes(buf)


def closed_by_peer(s, timeout=10):
    """True once the server closed (EOF or reset) within ``timeout`` s."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class RawClient(object):
    """A hand-made NBD client: fixed newstyle, NBD_OPT_GO, simple replies."""

    def __init__(self, uri, timeout=10):
        """Connect to the export of ``uri`` (nbd+unix:///NAME?socket=P)."""
        parts = parse.urlsplit(uri)
        self.export = parts.path.lstrip('/').encode()
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(parse.parse_qs(parts.query)['socket'][0])
        self.size = None
        self.flags = None

    def greeting(self):
        magic, opts, hflags = struct.unpack('>QQH', recv_exact(self.s, 18))
        assert magic == NBDMAGIC and opts == IHAVEOPT
        return hflags

    def handshake(self, export=None):
        export = self.export if export is None else export
        self.greeting()
        self.s.sendall(struct.pack('>I', 3))    # FIXED_NEWSTYLE|NO_ZEROES
        data = struct.pack('>I', len(export)) + export + struct.pack('>H', 0)
        self.s.sendall(struct.pack('>QII', IHAVEOPT, OPT_GO, len(data)) + data)
        while True:
            magic, opt, rtype, length = struct.unpack(
                '>QIII', recv_exact(self.s, 20))
            assert magic == REP_MAGIC and opt == OPT_GO
            payload = recv_exact(self.s, length)
            if rtype & (1 << 31):
                raise AssertionError('NBD_OPT_GO refused: %#x %r' %
                                     (rtype, payload))
            if rtype == REP_INFO and struct.unpack('>H', payload[:2])[0] == 0:
                _, self.size, self.flags = struct.unpack('>HQH', payload)
            if rtype == REP_ACK:
                break
        return self

    def request(self, cmd, offset, length, flags=0, cookie=1, payload=b''):
        self.s.sendall(struct.pack('>IHHQQI', REQUEST_MAGIC, flags, cmd,
                                   cookie, offset, length) + payload)

    def reply(self, read_length=0):
        magic, error, cookie = struct.unpack('>IIQ', recv_exact(self.s, 16))
        assert magic == SIMPLE_REPLY_MAGIC, hex(magic)
        data = recv_exact(self.s, read_length) if not error and read_length \
            else b''
        return error, cookie, data

    def close(self):
        self.s.close()


class Victim(object):
    """An attached volume with known content and a client on it."""

    def __init__(self, agent, origin, policy):
        self.agent = agent
        self.uri = agent.attach('victim', origin.uri, cache_size=MiB,
                                write_policy=policy)['export_uri']
        self.path = self.uri.split('socket=', 1)[1]
        self.oracle = om.Oracle(origin.content)
        self.h = om.connect(self.uri, strict=False)
        # Some cached, some dirty (write_back), some only at the origin.
        for off in range(0, 2 * MiB, 64 * 1024):
            data = os.urandom(64 * 1024)
            self.h.pwrite(data, off)
            self.oracle.write(off, data)
        self.h.pread(MiB, 4 * MiB)

    def check(self):
        """The agent serves old and new clients; the data is unchanged."""
        self.agent.assert_alive()
        got = self.h.pread(64 * 1024, 0)
        assert self.oracle.check(0, got) is None
        h2 = om.connect(self.uri)
        mism = om.verify_all(h2, self.oracle)
        assert not mism, mism
        om.close(h2)
        st = self.agent.show('victim')
        assert st['state'] == 'attached' and st['io_errors'] == 0, st


@pytest.fixture(params=['write_back', 'write_through'])
def victim(request, make_agent, make_origin):
    agent = make_agent(cache_size='4M').start()
    origin = make_origin(SIZE)
    v = Victim(agent, origin, request.param)
    yield v
    om.close(v.h)


def expect_nbd_error(fn, *errnos):
    """The request fails with one of ``errnos`` (numbers) from the server."""
    with pytest.raises(nbd.Error) as ei:
        fn()
    names = [errno_mod.errorcode[e] for e in errnos]
    # nbd.Error.errno is the errno's name ('EINVAL'); the message says
    # whether the server answered ("command failed") or libnbd refused.
    assert ei.value.errno in names, (ei.value, ei.value.errno)
    assert 'command failed' in str(ei.value), ei.value
    return ei.value


def test_out_of_range_requests(victim):
    h = victim.h
    size = h.get_size()
    assert size == SIZE
    expect_nbd_error(lambda: h.pread(BS, size), EINVAL)
    expect_nbd_error(lambda: h.pread(BS, size - 2048), EINVAL)
    expect_nbd_error(lambda: h.pread(512, (1 << 64) - 512), EINVAL)
    expect_nbd_error(lambda: h.pread(BS, (1 << 63)), EINVAL)
    expect_nbd_error(lambda: h.pwrite(b'\xee' * BS, size), ENOSPC, EINVAL)
    expect_nbd_error(lambda: h.pwrite(b'\xee' * BS, size - 512), ENOSPC,
                     EINVAL)
    expect_nbd_error(lambda: h.pwrite(b'\xee' * 512, (1 << 64) - 512),
                     ENOSPC, EINVAL)
    expect_nbd_error(lambda: h.zero(2 * BS, size - BS), ENOSPC, EINVAL)
    expect_nbd_error(lambda: h.trim(2 * BS, size - BS), EINVAL, ENOSPC)
    victim.check()


def test_unaligned_requests(victim):
    h = victim.h
    cases = [
        lambda: h.pread(100, 0),
        lambda: h.pread(BS, 100),
        lambda: h.pread(511, 512),
        lambda: h.pwrite(b'\xee' * 100, 0),
        lambda: h.pwrite(b'\xee' * 512, 256),
        lambda: h.pwrite(b'\xee' * 513, BS),
        lambda: h.trim(100, 0),
        lambda: h.zero(512, 100),
        lambda: h.pread(0, 0),               # zero-length
        lambda: h.pwrite(b'', 0),
    ]
    for fn in cases:
        expect_nbd_error(fn, EINVAL)
    victim.check()


def test_overlong_write_closes_that_connection(victim):
    c = RawClient(victim.uri).handshake()
    assert c.size == SIZE
    # A read above max_block (32 MiB) has no payload: a plain error.
    c.request(CMD_READ, 0, 33 * MiB, cookie=7)
    err, cookie, _ = c.reply()
    assert (err, cookie) == (EINVAL, 7)
    # The connection is still fine.
    c.request(CMD_READ, 0, BS, cookie=8)
    err, cookie, data = c.reply(BS)
    assert (err, cookie) == (0, 8) and victim.oracle.check(0, data) is None
    # A write whose payload is too big to skip: the server hangs up.
    c.request(CMD_WRITE, 0, 33 * MiB, cookie=9)
    sent = 0
    try:
        chunk = b'\xee' * MiB
        while sent < 33 * MiB:
            c.s.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    assert closed_by_peer(c.s), 'the agent kept the connection open'
    c.close()
    # Through libnbd as well (it checks nothing with strict mode off).
    h = om.connect(victim.uri, strict=False)
    with pytest.raises(nbd.Error):
        h.pwrite(b'\xee' * (33 * MiB), 0)
    victim.check()


def test_unknown_command_and_flags(victim):
    c = RawClient(victim.uri).handshake()
    c.request(99, 0, BS, cookie=0x1234)
    err, cookie, _ = c.reply()
    assert (err, cookie) == (EINVAL, 0x1234)
    # Unknown flag bits on a known command.
    c.request(CMD_READ, 0, BS, flags=1 << 12, cookie=0x1235)
    err, cookie, _ = c.reply()
    assert (err, cookie) == (EINVAL, 0x1235)
    # A flush with a range.
    c.request(CMD_FLUSH, 0, BS, cookie=0x1236)
    err, cookie, _ = c.reply()
    assert (err, cookie) == (EINVAL, 0x1236)
    # Still serving this connection, in order.
    c.request(CMD_READ, MiB, BS, cookie=0x1237)
    err, cookie, data = c.reply(BS)
    assert (err, cookie) == (0, 0x1237)
    assert victim.oracle.check(MiB, data) is None
    c.request(CMD_DISC, 0, 0)
    assert closed_by_peer(c.s)
    c.close()
    victim.check()


def test_bad_request_magic_drops_connection(victim):
    c = RawClient(victim.uri).handshake()
    c.s.sendall(struct.pack('>IHHQQI', 0xdeadbeef, 0, CMD_WRITE, 1, 0, BS) +
                b'\xee' * BS)
    assert closed_by_peer(c.s)
    c.close()
    victim.check()


@pytest.mark.parametrize('cut', ['mid-payload', 'mid-header'])
def test_client_disconnects_mid_request(victim, cut):
    c = RawClient(victim.uri).handshake()
    hdr = struct.pack('>IHHQQI', REQUEST_MAGIC, 0, CMD_WRITE, 1, 0, MiB)
    if cut == 'mid-payload':
        c.s.sendall(hdr + b'\xee' * (MiB // 2))
    else:
        c.s.sendall(hdr[:13])
    c.close()
    # The agent notices the hang-up; the half write changed nothing.
    deadline = time.monotonic() + 10
    while victim.agent.show('victim')['connections'] > 1:
        assert time.monotonic() < deadline, 'connection never reaped'
        time.sleep(0.05)
    victim.check()


@pytest.mark.parametrize('garbage', [
    'http', 'unknown-client-flags', 'bad-option-magic', 'huge-option',
    'silence', 'export-name-unknown', 'go-unknown-export'])
def test_garbage_handshake(victim, garbage):
    c = RawClient(victim.uri)
    if garbage == 'http':
        c.s.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n' + os.urandom(1000))
        assert closed_by_peer(c.s)
    elif garbage == 'unknown-client-flags':
        c.greeting()
        c.s.sendall(struct.pack('>I', 0xfffffff0))
        assert closed_by_peer(c.s)
    elif garbage == 'bad-option-magic':
        c.greeting()
        c.s.sendall(struct.pack('>I', 1))
        c.s.sendall(struct.pack('>QII', 0x1122334455667788, OPT_GO, 0))
        assert closed_by_peer(c.s)
    elif garbage == 'huge-option':
        c.greeting()
        c.s.sendall(struct.pack('>I', 1))
        c.s.sendall(struct.pack('>QII', IHAVEOPT, OPT_GO, 0xffffffff))
        assert closed_by_peer(c.s)
    elif garbage == 'silence':
        c.greeting()
        c.close()
    elif garbage == 'export-name-unknown':
        c.greeting()
        c.s.sendall(struct.pack('>I', 1))
        c.s.sendall(struct.pack('>QII', IHAVEOPT, 1, 5) + b'nope!')
        assert closed_by_peer(c.s)
    else:
        c.greeting()
        c.s.sendall(struct.pack('>I', 1))
        data = struct.pack('>I', 5) + b'nope!' + struct.pack('>H', 0)
        c.s.sendall(struct.pack('>QII', IHAVEOPT, OPT_GO, len(data)) + data)
        magic, opt, rtype, length = struct.unpack('>QIII',
                                                  recv_exact(c.s, 20))
        assert magic == REP_MAGIC and rtype & (1 << 31), hex(rtype)
        recv_exact(c.s, length)
        # Still haggling: the right name works on the same connection.
        data = (struct.pack('>I', len(c.export)) + c.export +
                struct.pack('>H', 0))
        c.s.sendall(struct.pack('>QII', IHAVEOPT, OPT_GO, len(data)) + data)
        while True:
            magic, opt, rtype, length = struct.unpack(
                '>QIII', recv_exact(c.s, 20))
            recv_exact(c.s, length)
            assert not rtype & (1 << 31)
            if rtype == REP_ACK:
                break
        c.request(CMD_READ, 0, BS, cookie=5)
        err, cookie, data = c.reply(BS)
        assert err == 0 and victim.oracle.check(0, data) is None
    c.close()
    victim.check()


# ---- structured replies, metadata contexts, block status --------------------

OPT_STRUCTURED_REPLY, OPT_LIST_META, OPT_SET_META = 8, 9, 10
REP_META_CONTEXT = 4
REP_ERR_INVALID, REP_ERR_UNKNOWN = (1 << 31) | 3, (1 << 31) | 6
CMD_CACHE, CMD_BLOCK_STATUS = 5, 7
FLAG_REQ_ONE, FLAG_DF = 1 << 3, 1 << 2
STRUCTURED_REPLY_MAGIC = 0x668e33ef
REPLY_FLAG_DONE = 1
REPLY_OFFSET_DATA, REPLY_BLOCK_STATUS, REPLY_ERROR = 1, 5, (1 << 15) | 1


def meta_payload(queries, export=b''):
    return (struct.pack('>I', len(export)) + export +
            struct.pack('>I', len(queries)) +
            b''.join(struct.pack('>I', len(q)) + q for q in queries))


class HagglingClient(RawClient):
    """A RawClient that negotiates options one by one."""

    def start(self):
        self.greeting()
        self.s.sendall(struct.pack('>I', 3))
        return self

    def option(self, opt, data=b''):
        """Send one option; its replies up to the ACK or error."""
        self.s.sendall(struct.pack('>QII', IHAVEOPT, opt, len(data)) + data)
        replies = []
        while True:
            magic, ropt, rtype, length = struct.unpack(
                '>QIII', recv_exact(self.s, 20))
            assert magic == REP_MAGIC and ropt == opt
            replies.append((rtype, recv_exact(self.s, length)))
            if rtype == REP_ACK or rtype & (1 << 31):
                return replies

    def go(self):
        data = (struct.pack('>I', len(self.export)) + self.export +
                struct.pack('>H', 0))
        assert self.option(OPT_GO, data)[-1][0] == REP_ACK
        return self

    def chunk(self):
        """One structured reply chunk: (flags, type, cookie, payload)."""
        magic, flags, rtype, cookie, length = struct.unpack(
            '>IHHQI', recv_exact(self.s, 20))
        assert magic == STRUCTURED_REPLY_MAGIC, hex(magic)
        return flags, rtype, cookie, recv_exact(self.s, length)

    def error_chunk(self, cookie):
        flags, rtype, got, payload = self.chunk()
        assert (flags, rtype, got) == (REPLY_FLAG_DONE, REPLY_ERROR, cookie)
        err, msglen = struct.unpack('>IH', payload[:6])
        assert len(payload) == 6 + msglen
        return err


def contexts(replies):
    """The (id, name) of each NBD_REP_META_CONTEXT; asserts the ACK."""
    assert replies[-1][0] == REP_ACK, replies
    return [(struct.unpack('>I', p[:4])[0], p[4:]) for t, p in replies[:-1]
            if t == REP_META_CONTEXT]


def test_meta_context_negotiation(victim):
    c = HagglingClient(victim.uri).start()
    base = [b'base:allocation']
    # Contexts need structured replies first (spec).
    assert c.option(OPT_SET_META, meta_payload(base, c.export))[-1][0] == \
        REP_ERR_INVALID
    assert c.option(OPT_LIST_META, meta_payload(base, c.export))[-1][0] == \
        REP_ERR_INVALID
    assert c.option(OPT_STRUCTURED_REPLY, b'x')[-1][0] == REP_ERR_INVALID
    assert c.option(OPT_STRUCTURED_REPLY)[-1][0] == REP_ACK
    # LIST: everything, a namespace, an exact name, another namespace.
    assert contexts(c.option(OPT_LIST_META, meta_payload([], c.export))) == \
        [(0, b'base:allocation')]
    assert contexts(c.option(OPT_LIST_META,
                             meta_payload([b'base:'], c.export))) == \
        [(0, b'base:allocation')]
    assert contexts(c.option(OPT_LIST_META, meta_payload(
        [b'qemu:dirty-bitmap:x', b'base:allocation'], c.export))) == \
        [(0, b'base:allocation')]
    assert contexts(c.option(OPT_LIST_META, meta_payload(
        [b'qemu:dirty-bitmap:x'], c.export))) == []
    # Malformed: a query count the payload cannot hold, a query running
    # past the end, trailing bytes, a name past the end; an unknown export.
    bad = [struct.pack('>II', 0, 0xffffffff),
           struct.pack('>III', 0, 1, 100) + b'base:allocation',
           meta_payload(base, c.export) + b'\0',
           struct.pack('>I', 50) + b'abc',
           b'\0\0']
    for data in bad:
        assert c.option(OPT_SET_META, data)[-1][0] == REP_ERR_INVALID, data
    assert c.option(OPT_SET_META, meta_payload(base, b'nope'))[-1][0] == \
        REP_ERR_UNKNOWN
    # SET selects only the exact name; a failed SET selected nothing.
    assert contexts(c.option(OPT_SET_META,
                             meta_payload([b'base:'], c.export))) == []
    c.go()
    c.request(CMD_BLOCK_STATUS, 0, BS, cookie=3)
    assert c.error_chunk(3) == EINVAL
    # Reads are structured now: one data chunk, and errors as chunks.
    c.request(CMD_READ, MiB, BS, cookie=4)
    flags, rtype, cookie, payload = c.chunk()
    assert (flags, rtype, cookie) == (REPLY_FLAG_DONE, REPLY_OFFSET_DATA, 4)
    assert struct.unpack('>Q', payload[:8])[0] == MiB
    assert victim.oracle.check(MiB, payload[8:]) is None
    c.request(CMD_READ, SIZE, BS, cookie=5)
    assert c.error_chunk(5) == EINVAL
    # Other commands keep simple replies.
    c.request(CMD_FLUSH, 0, 0, cookie=6)
    assert c.reply() == (0, 6, b'')
    c.close()
    victim.check()


def test_bad_block_status_requests(victim):
    c = HagglingClient(victim.uri).start()
    assert c.option(OPT_STRUCTURED_REPLY)[-1][0] == REP_ACK
    ctx = contexts(c.option(OPT_SET_META, meta_payload(
        [b'base:allocation', b'qemu:nope'], c.export)))
    assert len(ctx) == 1 and ctx[0][1] == b'base:allocation'
    ctx_id = ctx[0][0]
    c.go()
    bad = [(0, 0, 0), (100, BS, 0), (0, 100, 0), (SIZE, BS, 0),
           (SIZE - BS, 2 * BS, 0), ((1 << 64) - 512, 512, 0),
           (0, 0xfffffe00, 0), (0, BS, FLAG_DF), (0, BS, 1 << 12)]
    for i, (off, count, flags) in enumerate(bad):
        c.request(CMD_BLOCK_STATUS, off, count, flags=flags, cookie=100 + i)
        assert c.error_chunk(100 + i) == EINVAL, (off, count, flags)
    # Good ones still work on the same connection.
    c.request(CMD_BLOCK_STATUS, 0, SIZE, flags=FLAG_REQ_ONE | 1, cookie=7)
    flags, rtype, cookie, payload = c.chunk()
    assert (flags, rtype, cookie) == (REPLY_FLAG_DONE, REPLY_BLOCK_STATUS, 7)
    assert len(payload) == 12
    assert struct.unpack('>I', payload[:4])[0] == ctx_id
    c.request(CMD_BLOCK_STATUS, 512, SIZE - 512, cookie=8)
    flags, rtype, cookie, payload = c.chunk()
    assert (flags, rtype, cookie) == (REPLY_FLAG_DONE, REPLY_BLOCK_STATUS, 8)
    assert len(payload) >= 12 and (len(payload) - 4) % 8 == 0
    ext = struct.unpack('>%dI' % ((len(payload) - 4) // 4), payload[4:])
    lengths = ext[0::2]
    assert all(n > 0 and n % 512 == 0 for n in lengths)
    assert sum(lengths) <= SIZE - 512
    assert all(f & ~3 == 0 for f in ext[1::2])
    # CACHE: validated like the others, simple replies.
    c.request(CMD_CACHE, SIZE, BS, cookie=9)
    assert c.reply() == (EINVAL, 9, b'')
    c.request(CMD_CACHE, 0, 0, cookie=10)
    assert c.reply() == (EINVAL, 10, b'')
    c.request(CMD_CACHE, 0, 2 * BS, flags=FLAG_REQ_ONE, cookie=11)
    assert c.reply() == (EINVAL, 11, b'')
    c.request(CMD_CACHE, 2 * MiB, 2 * BS, cookie=12)
    assert c.reply() == (0, 12, b'')
    c.close()
    victim.check()


def test_block_status_without_structured_replies(victim):
    # Simple replies only: the request is refused with a simple reply.
    c = RawClient(victim.uri).handshake()
    c.request(CMD_BLOCK_STATUS, 0, BS, cookie=3)
    assert c.reply() == (EINVAL, 3, b'')
    c.request(CMD_READ, 0, BS, cookie=4)
    err, cookie, data = c.reply(BS)
    assert (err, cookie) == (0, 4) and victim.oracle.check(0, data) is None
    c.close()
    victim.check()
