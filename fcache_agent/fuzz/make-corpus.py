#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the fuzzers' seed corpora into fuzz/corpus/<harness>/.

Each seed is a small input in the format its harness reads (see the
comment at the top of fuzz/fuzz_<harness>.c): a few valid ones that carry
the fuzzer past the magic numbers, checksums and keywords to the code
behind them, and a few invalid ones.  The files are in the repository;
run this again after changing a format:

    python3 fuzz/make-corpus.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), as common/crc32c.c computes it."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def write(harness, name, data):
    d = os.path.join(HERE, 'corpus', harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


# --- NBD ------------------------------------------------------------------
OPTS_MAGIC = 0x49484156454F5054
REQ_MAGIC = 0x25609513


def opt(code, payload=b''):
    return struct.pack('>QII', OPTS_MAGIC, code, len(payload)) + payload


def go(name=b'vol-1', infos=(), code=7):
    return opt(code, struct.pack('>I', len(name)) + name +
               struct.pack('>H', len(infos)) +
               b''.join(struct.pack('>H', i) for i in infos))


def req(cmd, offset=0, count=0, flags=0, cookie=1, payload=b''):
    return struct.pack('>IHHQQI', REQ_MAGIC, flags, cmd, cookie, offset,
                       count) + payload


def meta(name, queries):
    return (struct.pack('>I', len(name)) + name +
            struct.pack('>I', len(queries)) +
            b''.join(struct.pack('>I', len(q)) + q for q in queries))


def nbd():
    flags = struct.pack('>I', 3)        # fixed newstyle, no zeroes
    io = (req(1, 0, 4096, flags=1, payload=b'x' * 4096) +
          req(0, 0, 4096) + req(3) + req(4, 8192, 4096) +
          req(6, 4096, 4096, flags=2) + req(6, 65536, 512) + req(2))
    write('nbd', 'go-io', b'\0' + flags + go(infos=(1, 2, 3)) + io)
    write('nbd', 'go-default-export', b'\0' + flags + go(b'') + req(0, 0, 512))
    write('nbd', 'export-name', b'\0' + struct.pack('>I', 1) +
          opt(1, b'vol-1') + req(0, 1 << 20, 512) + req(1, 0, 1 << 17))
    write('nbd', 'list-info-abort', b'\0' + flags + opt(3) + opt(3, b'x') +
          go(infos=(2,), code=6) + go(b'other') + opt(8) + opt(5) + opt(2))
    write('nbd', 'read-only', b'\1' + flags + go() + req(1, 0, 512,
          payload=b'y' * 512) + req(4, 0, 512) + req(0, 0, 512))
    write('nbd', 'bad-requests', b'\0' + flags + go() +
          req(0, 0, 0) + req(0, 1, 512) + req(9, 0, 512) +
          req(0, 0, 512, flags=0x40) + req(3, 1, 0) +
          req(0, 0xFFFFFFFFFFFFFE00, 1024) + b'\xde\xad\xbe\xef' * 7)
    write('nbd', 'oversized-option', b'\0' + flags +
          struct.pack('>QII', OPTS_MAGIC, 9, 9000) + b'z' * 9000 + opt(2))
    write('nbd', 'bad-flags', b'\0' + struct.pack('>I', 0x80))
    # Structured replies, metadata contexts, block status and cache.
    base = b'base:allocation'
    sr = opt(8)
    set_base = opt(10, meta(b'vol-1', [base, b'qemu:x']))
    write('nbd', 'structured-block-status', b'\0' + flags + sr + set_base +
          go() + req(1, 0, 4096, payload=b'd' * 4096) + req(0, 0, 4096) +
          req(0, 1 << 20, 512) + req(7, 0, 1 << 20) +
          req(7, 0, 1 << 20, flags=8) + req(7, 8192, 512) +
          req(7, 12288, 512) + req(7, 0, 0) + req(5, 0, 65536) +
          req(5, 4096, 512) + req(3) + req(2))
    write('nbd', 'meta-context-options', b'\0' + flags + opt(10, meta(b'',
          [base])) + opt(9, meta(b'', [])) + sr + opt(8, b'x') +
          opt(9, meta(b'', [])) + opt(9, meta(b'', [b'base:'])) +
          opt(10, meta(b'nope', [base])) +
          opt(10, b'\0\0\0\0\xff\xff\xff\xff') +
          opt(10, meta(b'', [b'base:'])) + go(b'') + req(7, 0, 4096) +
          req(0, 0, 512) + req(0, 1 << 30, 512))
    write('nbd', 'block-status-export-name', b'\1' + flags + sr + set_base +
          opt(1, b'vol-1') + req(7, 0, 65536, flags=9) + req(5, 0, 512))
    # The kernel's client, in transmission from the first byte (bit 1).
    write('nbd', 'kernel-io', b'\2' + io)
    write('nbd', 'kernel-read-only', b'\3' + req(1, 0, 512, payload=b'y' * 512)
          + req(0, 0, 4096) + req(3) + req(2))
    write('nbd', 'kernel-bad-requests', b'\2' + req(7, 0, 4096) +
          req(0, 0, 1 << 20) + req(1, 0, 1 << 17, payload=b'z' * 4096) +
          req(0, 1 << 20, 512) + b'\xde\xad\xbe\xef' * 7)


# --- control --------------------------------------------------------------
TOKEN = '0123456789abcdef' * 4


def control():
    attach = ('{"op":"volume-attach","args":{"volume_id":"vol-1",'
              '"origin":"$ORIGIN","cache_size":"64K",'
              '"write_policy":"write_back","admission":"rws"}}\n')
    write('control', 'status', '{"op":"agent-status"}\n')
    write('control', 'attach-show-detach', attach +
          '{"op":"volume-show","args":{"volume_id":"vol-1"}}\n'
          '{"op":"volume-list"}\n'
          '{"op":"volume-detach","args":{"volume_id":"vol-1"}}\n')
    write('control', 'key', '{"op":"migration-key","args":{'
          '"migration_id":"m-1","volume_id":"vol-2"}}\n'
          '{"op":"migration-key","args":{"migration_id":"m_2"}}\n')
    write('control', 'incoming', '{"op":"migration-incoming","args":{'
          '"migration_id":"m-1","volume_id":"vol-2","token":"%s",'
          '"strategy":"hybrid","origin":"$ORIGIN","write_policy":'
          '"write_through","admission":"all","cache_size":65536}}\n'
          '{"op":"migration-status","args":{"migration_id":"m-1"}}\n'
          '{"op":"migration-switchover","args":{"migration_id":"m-1"}}\n'
          '{"op":"migration-abort","args":{"migration_id":"m-1"}}\n'
          '{"op":"migration-start","args":{"migration_id":"m-1"}}\n' % TOKEN)
    write('control', 'settle', attach +
          '{"op":"migration-settle","args":{"volume_id":"vol-1",'
          '"migration_id":"m-9","step":"list","after":0,"limit":10,'
          '"blocks":[1,2,3],"rest":"forget","source":"127.0.0.1:1"}}\n')
    write('control', 'volume-set', attach +
          '{"op":"volume-set","args":{"volume_id":"vol-1",'
          '"write_policy":"write_through"}}\n'
          '{"op":"volume-set","args":{"volume_id":"vol-1",'
          '"write_policy":"write_back","cache_size":"64K"}}\n'
          '{"op":"volume-set","args":{"volume_id":"vol-1",'
          '"write_policy":"write_around"}}\n'
          '{"op":"volume-set","args":{"volume_id":"vol-1",'
          '"cache_size":"1M"}}\n'
          '{"op":"volume-set","args":{"volume_id":"vol-1"}}\n')
    write('control', 'malformed', '{"op":\n5\n[]\n{"op":5}\n{"op":"nope"}\n'
          '{"op":"volume-show","args":[]}\n'
          '{"op":"volume-attach","args":{"volume_id":"../x","origin":"/"}}\n'
          '{"op":"volume-attach","args":{"volume_id":"v","origin":"$ORIGIN",'
          '"cache_size":"12Q"}}\n{"op":"agent-status","op":"x"}\n'
          '\r\n{"op":"volume-show","args":{"volume_id":"\\u00e9"}}')


# --- migration stream -----------------------------------------------------
def frame(t, payload=b'', flags=0):
    return struct.pack('<BHH', t, flags, len(payload)) + payload


def raw(data):
    return struct.pack('<BHH', 0x80, 0, len(data)) + data


def xfer():
    LIST, SWITCH, BLOCK, DATA, DONE, ERROR = 4, 5, 6, 13, 10, 3
    dirty = 1 << 63
    lst = frame(LIST, struct.pack('<QQQ', 1, 2 | dirty, 255), flags=1)
    blk = frame(BLOCK, struct.pack('<Q', 1) + b'A' * 4096)
    dblk = frame(BLOCK, struct.pack('<Q', 2 | dirty) + b'B' * 4096)
    for s, name in enumerate(['none', 'cachemior', 'firepan', 'firepan_if',
                              'cloudcache', 'hybrid']):
        write('xfer', name, bytes([s]) + lst + blk + dblk +
              frame(SWITCH, b'{}') + frame(DONE))
    write('xfer', 'fetch-reply', bytes([5]) + lst +
          frame(BLOCK, struct.pack('<Q', 2 | dirty) + b'C' * 4096, flags=2) +
          frame(BLOCK, struct.pack('<Q', 1), flags=6) +
          frame(DATA, struct.pack('<Q', 1), flags=8) +
          frame(DATA, struct.pack('<QI', 1, 5), flags=16) +
          frame(DATA, struct.pack('<Q', 7) + b'D' * 512))
    # A copy in the device's order, then its hot list (LIST flagged ORDER),
    # for both firepans; and one the destination did not offer (hybrid).
    order = frame(LIST, struct.pack('<QQQ', 2 | dirty, 1, 9), flags=1 | 32)
    for s, name in ((2, 'firepan-order'), (3, 'firepan_if-order'),
                    (5, 'order-not-offered')):
        write('xfer', name, bytes([s]) + blk + dblk + order +
              frame(SWITCH, b'{}') + frame(DONE))
    write('xfer', 'error', bytes([0]) + frame(ERROR, b'{"error": "gave up"}'))
    # A settle session's frames are no transfer's: the stream ends.
    write('xfer', 'settle-step', bytes([5]) + lst +
          frame(14, b'{"step": "release", "rest": "drop"}') +
          frame(15, b'{}'))
    write('xfer', 'bad-list', bytes([5]) + frame(LIST, b'\1' * 12) +
          frame(LIST, b'\0' * 8 * 200))
    good = bytearray(16)
    struct.pack_into('<IBBHI', good, 0, 0x31584346, 1, SWITCH, 0, 0)
    struct.pack_into('<I', good, 12, crc32c(bytes(good[:12])))
    bad_crc = bytes(good[:12]) + b'\0\0\0\0'
    too_big = bytearray(good)
    struct.pack_into('<I', too_big, 8, (1 << 20) + 65)
    write('xfer', 'raw-frames', bytes([3]) + raw(bytes(good)) + raw(bad_crc) +
          raw(bytes(too_big)))


def xfer_source():
    FETCH, CREDIT, ACK, COMPLETE, READ, ERROR = 7, 8, 9, 11, 12, 3
    base = (frame(CREDIT, struct.pack('<I', 16)) +
            frame(FETCH, struct.pack('<QQ', 1, 300)) +
            frame(READ, struct.pack('<QQI', 1, 0, 4096)) +
            frame(READ, struct.pack('<QQI', 2, (1 << 20) - 512, 4096)) +
            frame(READ, struct.pack('<QQI', 3, 1 << 63, 1 << 21)))
    for s, name in enumerate(['none', 'cachemior', 'firepan', 'firepan_if',
                              'cloudcache', 'hybrid']):
        write('xfer_source', name, bytes([s]) + base)
        write('xfer_source', name + '-switched', bytes([0x80 | s]) + base +
              frame(COMPLETE))
    # A destination that fetches every block itself (dmcache's hybrid):
    # no background copy, DONE at once.
    write('xfer_source', 'no-background-switched', bytes([0xa5]) + base +
          frame(COMPLETE))
    write('xfer_source', 'settle-step', bytes([5]) + base +
          frame(14, b'{"step": "list"}') + frame(15, b'{"blocks": []}'))
    write('xfer_source', 'forged-ack', bytes([0x85]) +
          frame(ACK, struct.pack('<QQ', 1, 2)) + frame(COMPLETE))
    # A destination that acknowledges fetched blocks: the ACK of a block
    # served clean, or absent, still ends the migration.
    write('xfer_source', 'ack-fetched-switched', bytes([0x95]) + base +
          frame(ACK, struct.pack('<Q', 1)) + frame(COMPLETE))
    write('xfer_source', 'bad-frames', bytes([5]) + frame(CREDIT, b'\1') +
          frame(READ, b'\0' * 19) + frame(ACK, b'\0' * 7) +
          frame(ERROR, b'{"error": "no room"}'))


SETTLE_SECRET = 'a5' * 32


def hello():
    HELLO, LIST, SWITCH, BLOCK, DONE = 1, 4, 5, 6, 10

    def hi(**kw):
        h = {'migration_id': 'm-1', 'volume_id': 'vol-1', 'token': TOKEN,
             'block_size': 4096, 'strategy': 'hybrid', 'reads': True}
        h.update(kw)
        return frame(HELLO, json.dumps(h).encode())
    rest = (frame(LIST, struct.pack('<QQ', 3, 4 | (1 << 63)), flags=1) +
            frame(BLOCK, struct.pack('<Q', 3) + b'E' * 4096) +
            frame(SWITCH, b'{}') + frame(DONE))
    write('hello', 'accepted', hi() + rest)
    write('hello', 'rate-limited', hi(rate_limit_bps=4000000) + rest)
    write('hello', 'rate-negative', hi(rate_limit_bps=-1) + rest)
    write('hello', 'ack-fetched', hi(ack_fetched=True) + rest)
    write('hello', 'ack-fetched-not-bool', hi(ack_fetched='yes') + rest)
    write('hello', 'wrong-token', hi(token='f' * 64) + rest)
    write('hello', 'other-volume', hi(volume_id='vol-2'))
    write('hello', 'unknown-migration', hi(migration_id='m-2'))
    write('hello', 'malformed', frame(HELLO, b'{"migration_id": 5}') +
          frame(HELLO, b'not json'))
    write('hello', 'not-hello-first', frame(LIST, b'\0' * 8) + hi())
    # The source's allocation account (ucache/allocator.c, apply_state),
    # whole and damaged: taken value by value by the destination.
    write('hello', 'allocation', hi(allocation={
        'history': [100.0, 120.5, 90.0], 'share_blocks': 8,
        'error_sum': 0.25, 'error_n': 2, 'window_s': 4096}) + rest)
    write('hello', 'allocation-damaged', hi(allocation={
        'history': [1e308, -1.0, 'x', None], 'share_blocks': -1,
        'error_sum': 'x', 'error_n': 2 ** 40, 'window_s': -5}))
    write('hello', 'raw-garbage', raw(b'GET / HTTP/1.1\r\n\r\n'))
    # Settle sessions (migration/migr_settle_peer.c): the harness keeps
    # SETTLE_SECRET with the volume; its migration has not failed, so even
    # the right secret is refused, after the secret is checked.
    def settle(**kw):
        h = {'settle': True, 'migration_id': 'm-1', 'volume_id': 'vol-1',
             'secret': SETTLE_SECRET}
        h.update(kw)
        return frame(HELLO, json.dumps(h).encode())
    STEP = 14
    write('hello', 'settle-not-failed', settle() +
          frame(STEP, b'{"step": "list"}'))
    write('hello', 'settle-wrong-secret', settle(secret='0' * 64))
    write('hello', 'settle-other-volume', settle(volume_id='vol-2'))
    write('hello', 'settle-then-list', settle() + frame(LIST, b'\0' * 8))
    write('hello', 'settle-malformed', frame(HELLO, b'{"settle": true}'))


# --- ucache metadata ------------------------------------------------------
def metadata():
    tag = 0x0123456789abcdef
    hdr = struct.pack('<8sIIIII', b'FCACHEMD', 1, 4096, 64, 1, 32)
    hdr += struct.pack('<I', crc32c(hdr))

    def rec(ob, flags, rank=0, t=tag):
        body = struct.pack('<QQIII', ob, t, flags, rank, 0)
        return body + struct.pack('<I', crc32c(body))
    recs = rec(0, 1) + rec(1, 3, 1) + rec(255, 1, 2) + b'\0' * 32 + rec(7, 3)
    write('metadata', 'clean', b'\0' + hdr + recs + b'\0' * 32 * 59)
    running = bytearray(hdr)
    struct.pack_into('<I', running, 20, 2)
    struct.pack_into('<I', running, 28, crc32c(bytes(running[:28])))
    write('metadata', 'running', b'\0' + bytes(running) + recs)
    write('metadata', 'sealed-by-harness', b'\7' + hdr + recs +
          rec(1, 1) + rec(1 << 40, 3) + rec(3, 3, t=5))
    write('metadata', 'other-geometry', b'\1' + struct.pack(
        '<8sIIIII', b'FCACHEMD', 1, 512, 3, 1, 32) + b'\0' * 4 + b'\0' * 96)
    write('metadata', 'corrupt-record', b'\0' + hdr + rec(0, 1)[:31] + b'\1')
    write('metadata', 'not-metadata', b'\0' + b'hello' * 10)


# --- files ----------------------------------------------------------------
def files():
    write('config', 'full', """# agent.conf
[agent]
control_socket = /run/fcache/agent.sock
control_group = nova
state_dir = /var/lib/fcache
engine = ucache
cache_path = /var/lib/fcache/cache.img
cache_size = 10G   # ten gibibytes
block_size = 64KiB
migration_listen = [::1]:7440
migration_tls = x509
migration_tls_dir = /etc/pki/qemu
export_dir = /run/fcache/exports
export_group = kvm
log_level = debug
log_target = syslog
nbd_threads = 8
origin_connections = 4
migration_preload_depth = 128
cloudcache_variant = bg_rws
writeback_interval_ms = 500
dirty_high_percent = 60
dm_prefix = fc
origin_prefixes = /dev/disk/by-id/,/var/lib/nova/mnt/
""")
    write('config', 'default-section', '[DEFAULT]\r\nengine=dmcache\r\n'
          'cache_size = 1T\r\n; comment\r\n')
    write('config', 'errors', '[agent\nkey\nnbd_threads = 0\n'
          'cache_size = 99999999999T\nblock_size = 3000\n[other]\nx = 1\n')
    write('config', 'long-line', '[agent]\nstate_dir = /' + 'a' * 5000 + '\n')

    write('volume_state', 'good', '{"volume_id": "vol-1", "origin": '
          '"/dev/disk/by-id/x", "cache_size": 1073741824, "write_policy": '
          '"write_back", "admission": "all", "tag": "0123456789abcdef", '
          '"migration": "in:m-1"}')
    write('volume_state', 'bad-values', '{"volume_id": ".x", "origin": "", '
          '"cache_size": -1, "write_policy": "sometimes", "admission": "rws",'
          ' "tag": "0"}')
    write('volume_state', 'not-json', '{"volume_id": ')
    write('volume_state', 'settle-secret', '{"volume_id": "vol-1", "origin": '
          '"/dev/disk/by-id/x", "cache_size": 1073741824, "write_policy": '
          '"write_back", "admission": "all", "tag": "0123456789abcdef", '
          '"migration": "out:m-1", "settle_secret": "' + 'a5' * 32 + '", '
          '"settle_peer": "192.0.2.1:7440"}')
    write('volume_state', 'settle-secret-bad', '{"volume_id": "vol-1", '
          '"origin": "/dev/x", "cache_size": 4096, "write_policy": '
          '"write_back", "admission": "all", "tag": "0123456789abcdef", '
          '"migration": "in:m-1", "settle_secret": "A5", "settle_peer": 7}')

    write('origin_spec', 'rbd-full', 'rbd:volumes/ns/volume-1:id=cinder'
          ':conf=/etc/ceph/ceph.conf:keyring=/run/fcache/ceph/v.keyring'
          ':mon_host=10.0.0.1\\:6789;[\\:\\:1]\\:3300')
    write('origin_spec', 'rbd-escaped', 'rbd:p/a\\:b\\@c:id=u')
    write('origin_spec', 'rbd-refused', 'rbd:p/i@snap:log_file=/etc/passwd')
    write('origin_spec', 'nbd-unix', 'nbds+unix:///vol%201?socket=/run/a.sock'
          '&tls-username=x')
    write('origin_spec', 'nbd-tcp', 'nbd://[fd00::1]:10809/export')

    write('superseded', 'three', struct.pack('<QQQ', 1, 2, 1 << 63))
    write('superseded', 'torn', struct.pack('<Q', 5) + b'\1\2\3')
    write('superseded', 'empty', b'')

    write('dm_xml', 'cache-dump', b'\0' + b"""<superblock uuid="" \
block_size="128" nr_cache_blocks="4" policy="smq" hint_width="4">
  <mappings>
    <mapping cache_block="0" origin_block="3" dirty="true"/>
    <mapping cache_block="2" origin_block="9" dirty="false"/>
  </mappings>
  <hints>
    <hint cache_block="0" data="PwAAAA=="/>
    <hint cache_block="2" data="AQAAAA=="/>
  </hints>
</superblock>
""")
    write('dm_xml', 'cache-dump-bad', b'\0' + b"""<superblock block_size="8" \
nr_cache_blocks="2">
<mapping cache_block="5" origin_block="1" dirty="true"/>
<hint cache_block="1" data="!!"/>
""")
    write('dm_xml', 'era', b'\1' + b"""<blocks>
  <block block="6"/>
  <range begin="10" end = "12"/>
  <range begin="4000" end="5000"/>
</blocks>
""")
    write('dm_xml', 'era-bad', b'\1<range begin="9" end="3"/>\n')


# --- fcache-replay's traces ----------------------------------------------
def trace():
    csv = ('time,volume,op,offset,length\n'
           '0.0,vol-a,R,0,4096\n0.5,vol-a,W,8192,16384\n'
           '1.25,vol-b,read,512,1024\n\n2.0,vol-a,r,0,4096\n'
           '3.5, vol-b ,WRITE,4096,0\n7200,vol-a,R,0,65536\r\n')
    for sel, name in ((0x18, 'csv-rws'), (0x42, 'csv-lru-1s'),
                      (0x62, 'csv-hec-1s'), (0x4c, 'csv-wss-1s-64k')):
        write('trace', name, bytes([sel]) + csv.encode())
    write('trace', 'csv-bad', b'\x18' + b'0,v,R,0,4096\n1,v,X,0,1\n')
    write('trace', 'csv-huge-length', b'\x18' +
          b'0,v,R,0,18446744073709551615\n1,v,R,18446744073709551615,1\n')
    write('trace', 'csv-time-jump', b'\x58' +
          b'0,v,R,0,4096\n1e300,v,R,0,4096\n')

    def rec(t, oid, size=4096, nxt=-1):
        return struct.pack('<IQIq', t, oid, size, nxt)
    recs = b''.join(rec(t, oid) for t, oid in
                    ((0, 1), (0, 2), (1, 1), (2, 3 | 1 << 8), (4, 1),
                     (3600, 2), (3601, 1 << 40)))
    write('trace', 'oracle', b'\x19' + recs)
    write('trace', 'oracle-volumes-1s', b'\xd9' + recs)
    write('trace', 'oracle-torn', b'\x19' + recs[:30])


# --- a storage move's recovery log ----------------------------------------
def move_log():
    def header(uri=b'/fuzz/a', b=b'nbd://b/x', scheme=2, magic=0x46434d4f56454c47):
        return (struct.pack('<QIIII', magic, 1, scheme, len(uri), len(b)) +
                uri.ljust(1024, b'\0') + b.ljust(1024, b'\0'))

    def rec(off, data, magic=0x4d52):
        crc = crc32c(struct.pack('<IQ', len(data), off) + data)
        return struct.pack('<IIQII', magic, len(data), off, crc, 0) + data
    recs = rec(0, b'A' * 4096) + rec(8192, b'B' * 512) + rec(0, b'C' * 100)
    write('move_log', 'three-records', b'\0' + header() + recs)
    write('move_log', 'sealed-by-harness', b'\1' + header(scheme=4) +
          recs.replace(b'A' * 4, b'D' * 4) + rec(65536 - 16, b'E' * 16))
    write('move_log', 'torn', b'\0' + header() + recs[:-50])
    write('move_log', 'other-origin', b'\0' + header(uri=b'/fuzz/b') + recs)
    write('move_log', 'past-the-end', b'\1' + header() + rec(65536, b'F') +
          rec(1 << 63, b'G' * 8))
    write('move_log', 'bad-header', b'\0' + header(scheme=99)[:100])
    # A whole log of a scheme the agent does not replay: refused and kept.
    write('move_log', 'unknown-scheme', b'\0' + header(scheme=99) + recs)
    write('move_log', 'dbt-scheme', b'\0' + header(scheme=0) + recs)


# --- a volume's allocation state -----------------------------------------
# --- an NBD origin's replies ---------------------------------------------
SIMPLE_MAGIC, CHUNK_MAGIC = 0x67446698, 0x668e33ef


def origin_nbd_reply():
    """Records {ctl, u16 len, bytes}; ctl 1: the harness puts the cookie
    of the request it read in; ctl 3: another chunk, same request."""
    def record(data, ctl=1):
        return struct.pack('<BH', ctl, len(data)) + data

    def simple(error=0):
        return struct.pack('>IIQ', SIMPLE_MAGIC, error, 0)

    def chunk(ctype, payload, flags=1):
        return struct.pack('>IHHQI', CHUNK_MAGIC, flags, ctype, 0,
                           len(payload)) + payload

    def data(off, n, flags=1):
        return chunk(1, struct.pack('>Q', off) + bytes([0xab]) * n, flags)

    def extents(pairs, flags=1):
        return chunk(5, struct.pack('>I', 1) + b''.join(
            struct.pack('>II', n, f) for n, f in pairs), flags)

    tail = (1 << 20) - 32768
    ok = (record(data(0, 4096)) + record(simple()) + record(simple()) +
          record(extents([(8192, 0), (4096, 3), (53248, 0)])) +
          record(extents([(65536, 1)])) + record(simple()) +
          record(simple()) + record(data(tail, 32768)))
    write('origin_nbd_reply', 'all-ok', b'\xff' + ok)
    # A read in two chunks, a hole chunk, an error chunk.
    write('origin_nbd_reply', 'read-chunks',
          b'\x01' + record(data(0, 2048, flags=0)) +
          record(data(2048, 2048), ctl=3) +
          record(chunk(2, struct.pack('>QI', tail, 32768))) +
          record(chunk(32769, struct.pack('>IH', 5, 3) + b'bad')))
    # Errors everywhere; extents longer than asked, zero-length, too many.
    write('origin_nbd_reply', 'errors',
          b'\x7f' + record(chunk(32769, struct.pack('>IH', 5, 0))) +
          record(simple(28)) +
          record(simple(1)) +
          record(extents([(1 << 20, 0)])) +
          record(extents([(0, 0), (512, 2)])) +
          record(extents([(512, i & 3) for i in range(40)])))
    # A reply with no cookie match, a short one, then silence.
    write('origin_nbd_reply', 'wrong-cookie',
          b'\x05' + record(simple(), ctl=0) + record(simple()[:7]))
    write('origin_nbd_reply', 'hang-up', b'\xff')


# --- the migration listener's TLS ClientHello ---------------------------
# A TLS 1.3 ClientHello naming migration m-1 (server name "6d2d31", the
# hex the agent's source sends), captured once from Python's ssl module
# (its key share is random, so it is kept here rather than made anew).
CLIENT_HELLO = bytes.fromhex(
    '16030100eb010000e70303e9af38408025bc8dd251f6c62f9f72e8db7a56a3c7b4fd'
    '7d795942d1fe508e3c20c6f1c1e9388f681fea95970cf069f30e3f5d9dbcf5db8b48'
    '1fd68203338f2afa000813021303130100ff010000960000000b000900000636643264'
    '3331000b000403000102000a00160014001d0017001e00190018010001010102010301'
    '04002300000016000000170000000d001e001c04030503060308070808080908'
    '0a080b080408050806040105010601002b0003020304002d00020101003300260024'
    '001d00205c85b7f585f04df69398cfa164fe1859cbea392466bf3f6ee5d284f59d1c'
    'bb54')


def tls_hello():
    write('tls_hello', 'client-hello-m-1', CLIENT_HELLO)
    other = CLIENT_HELLO.replace(b'6d2d31', b'6d2d32')      # m-2: unknown
    write('tls_hello', 'client-hello-unknown', other)
    bad = CLIENT_HELLO.replace(b'6d2d31', b'6d2g31')        # not hex
    write('tls_hello', 'client-hello-bad-name', bad)
    # The hello, then a client flight no key opens (an application-data
    # record of garbage), and a hello cut short.
    write('tls_hello', 'client-hello-then-garbage', CLIENT_HELLO +
          b'\x17\x03\x03\x00\x20' + bytes(range(32)))
    write('tls_hello', 'client-hello-torn', CLIENT_HELLO[:100])
    write('tls_hello', 'not-tls', b'GET / HTTP/1.1\r\n\r\n')


def alloc_state():
    def state(hist, share=8, esum=0.5, en=2):
        return json.dumps({'history': hist, 'share_blocks': share,
                           'error_sum': esum, 'error_n': en})
    write('alloc_state', 'good', state([4.0, 6.0, 5.0, 12.0, 3.0]))
    write('alloc_state', 'long', state([float(i % 17) for i in range(80)]))
    write('alloc_state', 'huge-values', state([1e308, 1.8e19, 1e15], share=16))
    write('alloc_state', 'bad-values', state([-1.0, 0.0, 'x', None], share=-5,
                                             esum=-1, en=-3))
    write('alloc_state', 'not-state', '{"history": 5}')


# --- the dmcache engine's flash pool table --------------------------------
def flash_pool():
    head = '# fcache flash pool: owner start length (extents of 1048576 bytes)\n'
    write('flash_pool', 'two-volumes', head + 'vol-1/meta 0 1\nvol-1/data 1 16\n'
          'vol-2/meta 17 1\nvol-2/data 18 8\nvol-1/data 40 4\n')
    write('flash_pool', 'overlap', head + 'a 0 4\nb 3 2\n')
    write('flash_pool', 'past-capacity', head + 'a 60 8\nb 18446744073709551615 1\n')
    write('flash_pool', 'malformed', 'a 1\nb -1 2\nc 1 0\nd 1 2 3\n' + 'e' * 300 +
          ' 1 1\n')
    write('flash_pool', 'empty', '')


# --- the kernel NBD client's netlink answers (dmcache/dm_nbd_msg.c) -------
def dm_nbd_msg():
    def nla(typ, payload):
        a = struct.pack('<HH', 4 + len(payload), typ) + payload
        return a + b'\0' * (-len(a) % 4)

    def msg(typ, attrs, seq=1):
        body = struct.pack('<BBH', 1, 1, 0) + attrs
        return struct.pack('<IHHII', 16 + len(body), typ, 0, seq, 0) + body

    def ack(err, seq=1):
        return struct.pack('<IHHIIi', 36, 2, 0, seq, 0, err) + b'\0' * 16

    family = nla(2, b'nbd\0') + nla(1, struct.pack('<H', 0x1b))
    write('dm_nbd_msg', 'family-answer', b'\0' + msg(0x10, family) + ack(0))
    write('dm_nbd_msg', 'connect-answer', b'\0' + msg(0x1b, nla(1, struct.pack(
        '<I', 3))) + ack(0))
    write('dm_nbd_msg', 'error-and-stale', b'\0' + ack(-16, seq=0) +
          msg(0x1b, nla(1, b'\1\0'), seq=7) + ack(-28))
    write('dm_nbd_msg', 'nested', b'\0' + msg(0x1b, nla(0x8007, nla(
        0x8001, nla(1, struct.pack('<I', 9))))) + ack(0))
    write('dm_nbd_msg', 'build', b'\1' + bytes(range(1, 80)))
    write('dm_nbd_msg', 'build-any-index', b'\1\xff' * 40)


if __name__ == '__main__':
    nbd()
    dm_nbd_msg()
    control()
    xfer()
    xfer_source()
    hello()
    metadata()
    files()
    trace()
    move_log()
    origin_nbd_reply()
    tls_hello()
    alloc_state()
    flash_pool()
