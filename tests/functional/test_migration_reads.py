# SPDX-License-Identifier: Apache-2.0
"""Reads before the switchover, at the edges of the protocol.

A destination read before the switchover is forwarded to the source
(``READ``, answered by ``DATA``; doc/reference/migration.rst, "Reads before the
switchover").  Here one end is the real agent and the other a script
speaking the transfer protocol, so that each answer -- good, late,
malformed, refused -- can be given on purpose.  The script speaks the
stream in plaintext (``scripted_peer``): what it tests lies behind the TLS
layer, which test_migration_tls.py covers.
"""

import errno
import json
import socket
import struct
import threading
import time

import pytest

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

pytestmark = pytest.mark.scripted_peer

BS = mu.BS
MiB = mu.MiB


def fake_source(dst, origin, policy='write_back', reads=True):
    inc = mu.incoming_only(dst, 'vol1', origin.uri, 2 * MiB, policy)
    s = mu.connect_listen(inc['listen'])
    s.sendall(mu.hello(inc['migration_id'], 'vol1', inc['token'],
                       reads=reads))
    ftype, _, payload = mu.recv_frame(s)
    assert ftype == mu.T_WELCOME, (ftype, payload)
    mu.wait_state(dst, inc['migration_id'], ('connected',), timeout=5)
    return inc, s


def next_read(s):
    """The next READ the destination sends: (tag, offset, length)."""
    while True:
        ftype, _, payload = mu.recv_frame(s)
        if ftype == mu.T_READ:
            assert len(payload) == 20, payload
            return struct.unpack('<QQI', payload)


def test_destination_forwards_reads_until_the_switch(make_agent,
                                                     make_origin):
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin)
    h = om.connect(inc['export_uri'])
    try:
        # A read is asked of the source and returns what it answers.
        pending, finish = mu.gated(h, 3 * BS, 2 * BS)
        assert pending
        tag, off, length = next_read(s)
        assert (off, length) == (3 * BS, 2 * BS)
        answer = bytes([0xa7]) * length
        # A reply for a read nobody waits for is dropped, not an error.
        s.sendall(mu.frame(mu.T_DATA, struct.pack('<Q', tag + 1000)))
        s.sendall(mu.frame(mu.T_DATA, struct.pack('<Q', tag) + answer))
        err, data = finish(timeout=10)
        assert err == 0 and data == answer
        # An error the source reports reaches the reader.
        pending, finish = mu.gated(h, 0, BS)
        tag, _, _ = next_read(s)
        s.sendall(mu.frame(mu.T_DATA, struct.pack('<QI', tag, errno.EIO),
                           flags=mu.F_ERROR))
        assert finish(timeout=10)[0] == errno.EIO
        # RETRY: the source is switching; the read waits for SWITCH and
        # is then served here (the origin: nothing is listed).
        pending, finish = mu.gated(h, 5 * BS, BS)
        tag, _, _ = next_read(s)
        s.sendall(mu.frame(mu.T_DATA, struct.pack('<Q', tag),
                           flags=mu.F_RETRY))
        try:
            finish(timeout=0.3)
        except AssertionError as exc:
            assert 'did not complete' in str(exc), exc
        else:
            raise AssertionError('a read the source declined was answered '
                                 'before the switch')
        s.sendall(mu.frame(mu.T_SWITCH, b'{}'))
        err, data = finish(timeout=10)
        assert err == 0
        assert data == bytes(origin.content[5 * BS:6 * BS])
        st = mu.status(dst, inc['migration_id'])
        assert st['forwarded_reads'] == 1, st
        assert st['state'] == 'switched', st
    finally:
        om.close(h)
        s.close()


def test_destination_ends_stream_on_data_of_wrong_size(make_agent,
                                                       make_origin):
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin)
    h = om.connect(inc['export_uri'])
    try:
        pending, finish = mu.gated(h, 0, 2 * BS)
        tag, _, _ = next_read(s)
        s.sendall(mu.frame(mu.T_DATA, struct.pack('<Q', tag) + b'\0' * BS))
        # The read fails instead of returning half an answer, and the
        # stream from a source that breaks the protocol ends.
        assert finish(timeout=10)[0] == errno.EIO
        st = mu.wait_state(dst, inc['migration_id'], ('failed',),
                           timeout=10)
        assert 'transfer stream from the source lost' in st['error'], st
    finally:
        om.close(h)
        s.close()


def test_older_source_gets_no_reads(make_agent, make_origin):
    """A source whose HELLO lacks ``reads``: reads wait for SWITCH."""
    dst = make_agent(name='dst').start()
    origin = make_origin(4 * MiB)
    inc, s = fake_source(dst, origin, reads=None)
    h = om.connect(inc['export_uri'])
    try:
        pending, finish = mu.gated(h, 0, BS)
        assert pending
        s.settimeout(0.5)
        try:
            got = s.recv(64)
        except socket.timeout:
            got = None
        assert got is None, 'a READ went to a source that cannot answer'
        s.sendall(mu.frame(mu.T_SWITCH, b'{}'))
        err, data = finish(timeout=10)
        assert err == 0 and data == bytes(origin.content[:BS])
    finally:
        om.close(h)
        s.close()


class FakeDestination(object):
    """A listener standing in for the destination agent."""

    def __init__(self, welcome=None):
        self.welcome = welcome or {'credits': 16}
        self.lsock = socket.socket()
        self.lsock.bind(('127.0.0.1', 0))
        self.lsock.listen(1)
        self.address = '127.0.0.1:%d' % self.lsock.getsockname()[1]
        self.sock = None
        self.hello = None
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        self.lsock.settimeout(20)
        self.sock, _ = self.lsock.accept()
        ftype, _, payload = mu.recv_frame(self.sock)
        assert ftype == mu.T_HELLO
        self.hello = json.loads(payload)
        self.sock.sendall(mu.frame(mu.T_WELCOME,
                                   json.dumps(self.welcome).encode()))

    def read(self, tag, off, length):
        self.sock.sendall(mu.frame(mu.T_READ,
                                   struct.pack('<QQI', tag, off, length)))

    def answer(self):
        while True:
            ftype, flags, payload = mu.recv_frame(self.sock)
            if ftype == mu.T_DATA:
                return flags, payload

    def close(self):
        if self.sock:
            self.sock.close()
        self.lsock.close()


def outgoing_to_fake(src, fake):
    mid = 'm-reads'
    src.client().call('migration-outgoing', migration_id=mid,
                      volume_id='vol1', token='ab' * 32, strategy='hybrid',
                      destination=fake.address, rate_limit_bps=0)
    src.client().call('migration-start', migration_id=mid)
    fake.thread.join(10)
    return mid


def test_source_answers_reads_with_current_data(make_agent, make_origin):
    src = make_agent(name='src').start()
    origin = make_origin(4 * MiB)
    orc = om.Oracle(origin.content)
    res = src.attach('vol1', origin.uri, cache_size=MiB,
                     write_policy='write_back')
    h = om.connect(res['export_uri'])
    fresh = bytes([0x3c]) * (2 * BS)
    h.pwrite(fresh, 8 * BS)           # dirty on the source
    orc.write(8 * BS, fresh)
    h.pread(4 * BS, 20 * BS)           # clean, cached
    before = src.show('vol1')
    fake = FakeDestination()
    try:
        mid = outgoing_to_fake(src, fake)
        assert fake.hello['reads'] is True, fake.hello
        # A range over dirty, missing and clean blocks, unaligned.
        fake.read(7, 7 * BS + 100, 16 * BS)
        flags, payload = fake.answer()
        assert flags == 0 and payload[:8] == struct.pack('<Q', 7)
        assert not orc.check(7 * BS + 100, bytearray(payload[8:]))
        # Past the end: an error, and the stream goes on.
        fake.read(8, 4 * MiB - BS, 2 * BS)
        flags, payload = fake.answer()
        assert flags == mu.F_ERROR, flags
        assert struct.unpack('<QI', payload) == (8, errno.EINVAL)
        # The source changed nothing to answer.
        after = src.show('vol1')
        for key in ('cached_blocks', 'dirty_blocks', 'reads',
                    'origin_read_bytes'):
            assert after[key] == before[key], (key, before, after)
        # Once the switchover has begun the source no longer answers.
        src.client().call('migration-switchover', migration_id=mid)
        fake.read(9, 0, BS)
        flags, payload = fake.answer()
        assert flags == mu.F_RETRY and payload == struct.pack('<Q', 9)
    finally:
        fake.close()
        om.close(h)


def test_source_ends_stream_on_too_many_reads(make_agent, make_origin):
    src = make_agent(name='src').start()
    origin = make_origin(4 * MiB)
    res = src.attach('vol1', origin.uri, cache_size=MiB,
                     write_policy='write_through')
    fake = FakeDestination()
    try:
        mid = outgoing_to_fake(src, fake)
        # 32 outstanding is the most a destination may have; the source
        # stops reading its socket's answers only if we never read them,
        # so send them all in one go.
        burst = b''.join(mu.frame(mu.T_READ,
                                  struct.pack('<QQI', t, 0, MiB))
                         for t in range(200))
        fake.sock.sendall(burst)
        st = mu.wait_state(src, mid, ('failed',), timeout=20)
        print(st['error'])
        assert 'Protocol error' in st['error'], st
        # The VM's volume is untouched and still served.
        h = om.connect(res['export_uri'])
        assert h.pread(BS, 0) == bytes(origin.content[:BS])
        om.close(h)
    finally:
        fake.close()


def switched_to_fake(make_agent, make_origin, welcome=None):
    """A write_back source switched over to a scripted destination.

    Its write-back is put off for the test's length, so that its 64 dirty
    blocks (0 to 63) are still dirty at the switchover however busy the
    machine; blocks 100 to 103 are cached clean.
    """
    src = make_agent(name='src', writeback_interval_ms=600000,
                     dirty_high_percent=95).start()
    origin = make_origin(4 * MiB)
    res = src.attach('vol1', origin.uri, cache_size=MiB,
                     write_policy='write_back')
    h = om.connect(res['export_uri'])
    h.pwrite(bytes([0x42]) * (64 * BS), 0)      # 64 dirty blocks
    h.pread(4 * BS, 100 * BS)                   # 4 clean ones
    om.close(h)
    fake = FakeDestination(welcome)
    mid = outgoing_to_fake(src, fake)
    src.client().call('migration-switchover', migration_id=mid)
    return src, fake, mid


def test_source_refuses_ack_for_a_block_it_did_not_send(
        make_agent, make_origin):
    """A forged ACK must not make the source drop a dirty block."""
    src, fake, mid = switched_to_fake(make_agent, make_origin)
    try:
        dirty = src.show('vol1')['dirty_blocks']
        assert dirty == 64, dirty
        # A block the source never had, let alone sent.
        fake.sock.sendall(mu.frame(mu.T_ACK, struct.pack('<Q', 999999)))
        st = mu.wait_state(src, mid, ('failed',), timeout=10)
        assert 'did not send dirty' in st['error'], st
        assert src.show('vol1')['dirty_blocks'] == dirty
    finally:
        fake.close()


DIRTY_BIT = 1 << 63
F_REPLY, F_ABSENT = 1 << 1, 1 << 2


def fetch(fake, *blocks):
    """FETCH blocks; their replies, {block: dirty}."""
    fake.sock.sendall(mu.frame(mu.T_FETCH,
                               b''.join(struct.pack('<Q', b) for b in blocks)))
    got = {}
    while len(got) < len(blocks):
        ftype, flags, payload = mu.recv_frame(fake.sock)
        if ftype != mu.T_BLOCK or not flags & F_REPLY:
            continue                    # the LIST and the SWITCH
        assert not flags & F_ABSENT and len(payload) == 8 + BS, flags
        ob = struct.unpack('<Q', payload[:8])[0]
        got[ob & ~DIRTY_BIT] = bool(ob & DIRTY_BIT)
    return got


def ack(fake, block):
    fake.sock.sendall(mu.frame(mu.T_ACK, struct.pack('<Q', block)))


def test_source_frees_a_fetched_dirty_block_on_its_ack(
        make_agent, make_origin):
    """A destination that said "ack_fetched" may free what it fetched dirty.

    Only that: the ACK of a block the source served clean still fails the
    migration, with every block kept.  (No credit, so nothing moves in the
    background: the blocks go by FETCH alone.)
    """
    src, fake, mid = switched_to_fake(
        make_agent, make_origin, {'credits': 0, 'ack_fetched': True})
    try:
        assert fake.hello['ack_fetched'] is True, fake.hello
        before = src.show('vol1')
        assert before['dirty_blocks'] == 64, before
        assert fetch(fake, 5, 100) == {5: True, 100: False}
        ack(fake, 5)
        deadline = time.monotonic() + 10
        while src.show('vol1')['dirty_blocks'] != 63:
            assert time.monotonic() < deadline, src.show('vol1')
            time.sleep(0.05)
        after = src.show('vol1')
        assert after['cached_blocks'] == before['cached_blocks'] - 1, after
        assert mu.status(src, mid)['state'] == 'switched'
        # Block 100 went out clean: the origin has it, and an ACK of it is
        # a broken peer's.
        ack(fake, 100)
        st = mu.wait_state(src, mid, ('failed',), timeout=10)
        assert 'nor serve dirty to a fetch' in st['error'], st
        assert src.show('vol1')['cached_blocks'] == after['cached_blocks']
        assert src.show('vol1')['dirty_blocks'] == 63
    finally:
        fake.close()


def test_source_refuses_ack_of_a_fetched_block_unless_offered(
        make_agent, make_origin):
    """An older destination may not free what it fetched.

    Its WELCOME does not say "ack_fetched": the source frees what it
    served at COMPLETE, and takes an ACK of it for a forged one.
    """
    src, fake, mid = switched_to_fake(make_agent, make_origin,
                                      {'credits': 0})
    try:
        assert fetch(fake, 5) == {5: True}
        ack(fake, 5)
        st = mu.wait_state(src, mid, ('failed',), timeout=10)
        assert 'did not send dirty' in st['error'], st
        assert 'fetch' not in st['error'], st
        assert src.show('vol1')['dirty_blocks'] == 64
    finally:
        fake.close()


def test_source_refuses_complete_before_it_sent_everything(
        make_agent, make_origin):
    src, fake, mid = switched_to_fake(make_agent, make_origin)
    try:
        fake.sock.sendall(mu.frame(mu.T_COMPLETE))
        st = mu.wait_state(src, mid, ('failed',), timeout=10)
        assert 'before this source sent every block' in st['error'], st
        # Nothing was forgotten: every dirty block is still here.
        assert src.show('vol1')['dirty_blocks'] == 64
    finally:
        fake.close()
