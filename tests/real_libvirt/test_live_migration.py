# SPDX-License-Identifier: Apache-2.0
"""Live migration between two real libvirt daemons, in the Nova driver's order.

The fcache phases run as ``nova_ext.virt`` runs them (outgoing.py,
incoming.py): ``prepare`` on the destination agent
(``pre_live_migration``), then on the source ``start`` (``firepan``: the
guest is paused first), then ``virDomainMigrateToURI3`` with Nova's flags
and parameters -- libvirt starts the destination QEMU inside that call,
and QEMU reads the disk at device realize, before any switchover -- then
``switchover`` and ``finish`` (Nova's post method), then the destination
resumes a guest kept paused (``post_live_migration_at_destination``).

Patterns written through the guest disk before, during and after the
migration read back right on the destination; the destination agent holds
the cache.  doc/reference/nova.rst, "Real libvirt", says how to run this alone.
"""

import os
import threading
import time
import uuid

import libvirt
import pytest

from nova_ext import migration
from nova_ext.virt import reconnect

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import guest as guest_mod
from . import hosts as hosts_mod

MiB = mu.MiB
BS = mu.BS
VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
MIGRATE_TIMEOUT_S = 90
# (pattern byte, offset, length): written through the guest disk.
BEFORE = [(0xab, 0, MiB), (0xcd, 5 * MiB, 512 * 1024),
          (0x5a, 30 * MiB, 2 * MiB)]
DURING = [(0x3e, 9 * MiB, 256 * 1024)]
AFTER = [(0x77, 2 * MiB, 256 * 1024), (0x3c, 20 * MiB, MiB)]
COPYING = ('firepan', 'firepan_if', 'cloudcache', 'hybrid')


class Migrator(object):
    """virDomainMigrateToURI3 in a thread (Nova: _live_migration_operation)."""

    def __init__(self, guest, dst_host, dst_xml, bandwidth_mib=0):
        self.guest = guest
        self.params = {
            libvirt.VIR_MIGRATE_PARAM_URI: 'tcp://%s' % dst_host.addr,
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: dst_xml,
            libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: [],
            libvirt.VIR_MIGRATE_PARAM_BANDWIDTH: bandwidth_mib,
        }
        self.dconnuri = dst_host.migration_uri
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.guest.dom.migrateToURI3(self.dconnuri, self.params,
                                         hosts_mod.NOVA_LIVE_MIGRATION_FLAGS)
        except libvirt.libvirtError as exc:
            self.error = exc
        finally:
            self.done.set()

    def start(self):
        self.thread.start()
        return self

    def wait(self, timeout, diagnose):
        if not self.done.wait(timeout):
            problem = diagnose()
            try:
                self.guest.dom.abortJob()
            except libvirt.libvirtError:
                pass
            self.done.wait(30)
            raise AssertionError('libvirt migration still running after %d s'
                                 ' (aborted): %s' % (timeout, problem))
        return self.error


def diagnosis(dst_host, name, dst_agent, mid):
    try:
        dom = dst_host.conn().lookupByName(name)
        state = dom.state()
    except libvirt.libvirtError as exc:
        state = 'no domain (%s)' % exc
    try:
        vol = dst_agent.show('vol1')
        vol = {k: vol.get(k) for k in ('reads', 'read_hits', 'read_misses')}
    except Exception as exc:       # the report is the point here
        vol = exc
    try:
        st = mu.status(dst_agent, mid)
    except Exception as exc:
        st = exc
    return ('destination domain state %s; destination volume %s; '
            'migration %s; agent log:\n%s' % (
                state, vol, st, mu.log_excerpt(dst_agent, 'migration|nbd',
                                               12)))


def qemu_pid(name):
    """The pid of the QEMU libvirt runs for domain ``name``."""
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % p, 'rb') as f:
                cmd = f.read().split(b'\0')
        except OSError:
            continue
        if cmd and b'qemu-system' in cmd[0] and \
                ('guest=%s' % name).encode() in b','.join(cmd):
            return int(p)
    raise AssertionError('no QEMU process for domain %s' % name)


def setup(libvirt_hosts, make_agent, make_origin, policy,
          dst_clients='session'):
    src_host, dst_host = libvirt_hosts
    src_host.clean_domains()
    dst_host.clean_domains()
    src = make_agent(name='src', export_group='libvirt-qemu',
                     **mu.source_config(policy)).start()
    dst = make_agent(name='dst', export_group='libvirt-qemu',
                     export_clients=dst_clients).start()
    origin = make_origin(VOLUME_SIZE)
    orc = om.Oracle(origin.content)
    res = src.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
                     write_policy=policy)
    name = 'vm-%s' % uuid.uuid4().hex[:8]
    dom_uuid = str(uuid.uuid4())
    xml = guest_mod.domain_xml(name, dom_uuid, res['export_uri'], 'vol1')
    src_host.conn().defineXML(xml).create()
    g = guest_mod.Guest(src_host, name, 'vol1')
    g.wait_state((libvirt.VIR_DOMAIN_RUNNING,))
    # As the driver does when the guest starts: the migration must work
    # with the disk's NBD node replaced (test_agent_restart.py).
    sock = res['export_uri'].split('socket=', 1)[1]
    assert reconnect.set_delay(g.dom, [sock], 30) == 1
    # What export_clients = session rests on: libvirt starts each QEMU in
    # a kernel session of its own (doc/admin/security.rst), not libvirtd's and
    # not ours.
    sid = os.getsid(qemu_pid(name))
    with open(os.path.join(src_host.run_dir, 'libvirtd.pid')) as f:
        libvirtd = int(f.read().split()[0])
    assert sid not in (os.getsid(0), os.getsid(libvirtd)), sid
    return src, dst, orc, g, dom_uuid


@pytest.mark.timeout(240)
@pytest.mark.parametrize('strategy,policy', [
    ('none', 'write_back'), ('cachemior', 'write_through'),
    ('firepan', 'write_back'), ('firepan_if', 'write_back'),
    ('cloudcache', 'write_back'), ('hybrid', 'write_back')])
def test_live_migration_in_nova_order(libvirt_hosts, make_agent, make_origin,
                                      strategy, policy):
    src_host, dst_host = libvirt_hosts
    src, dst, orc, g, dom_uuid = setup(libvirt_hosts, make_agent,
                                       make_origin, policy)
    for byte, off, length in BEFORE:
        g.write(orc, byte, off, length)
    # The check itself: a wrong pattern is noticed.
    out = g.qemu_io('read -P 0xee 0 4096')
    assert 'Pattern verification failed' in out, out
    g.qemu_io('read 8M 4M')         # warm the cache through the guest
    before = src.show('vol1')
    assert before['cached_blocks'] > 0, before
    if policy == 'write_back':
        assert before['dirty_blocks'] > 0, before

    s, d = src.client(), dst.client()
    rate = 4 if strategy in ('firepan_if', 'cloudcache', 'hybrid') else None
    prepared = migration.prepare(s, d, 'vol1', strategy,
                                 rate_limit_mbps=rate)
    mid = prepared['migration_id']
    if strategy == 'firepan':
        g.dom.suspend()              # the driver pauses the guest first
    migration.start(s, d, mid)
    if strategy != 'firepan':
        # The guest still runs on the source and writes there.
        for byte, off, length in DURING:
            g.write(orc, byte, off, length)
    dst_xml = guest_mod.domain_xml(g.name, dom_uuid, prepared['export_uri'],
                                   'vol1')
    t0 = time.monotonic()
    err = Migrator(g, dst_host, dst_xml).start().wait(
        MIGRATE_TIMEOUT_S, lambda: diagnosis(dst_host, g.name, dst, mid))
    assert err is None, 'libvirt migration failed: %s\n%s' % (
        err, diagnosis(dst_host, g.name, dst, mid))
    memory_s = time.monotonic() - t0
    # Nova's post method on the source: the cache switches over.
    migration.switchover(s, d, mid)
    g.moved_to(dst_host)
    if strategy == 'firepan':
        # libvirt kept the guest paused; the destination resumes it.
        assert g.state() == libvirt.VIR_DOMAIN_PAUSED
        g.dom.resume()
    g.wait_state((libvirt.VIR_DOMAIN_RUNNING,))
    for byte, off, length in BEFORE + (DURING if strategy != 'firepan'
                                       else []):
        g.check(byte, off, length, 'destination, cache still moving')
    for byte, off, length in AFTER:
        g.write(orc, byte, off, length)
    summary = migration.finish(s, d, mid, timeout_s=90)
    print('%s/%s: libvirt %.1f s, %s' % (strategy, policy, memory_s,
                                         summary))
    assert summary['state'] == 'completed', summary
    expected = BEFORE + AFTER + (DURING if strategy != 'firepan' else [])
    for byte, off, length in expected:
        g.check(byte, off, length, 'destination after')
    assert mu.volume_gone(src, 'vol1'), 'the source kept the volume'
    st = dst.show('vol1')
    assert st['io_errors'] == 0, st
    if strategy in COPYING:
        assert summary['blocks_transferred'] > 0, summary
        assert st['cached_blocks'] > 0, st
    # The source daemon forgot the domain (VIR_MIGRATE_UNDEFINE_SOURCE),
    # the destination kept it (VIR_MIGRATE_PERSIST_DEST).
    assert g.name not in [x.name() for x in src_host.conn().listAllDomains()]
    assert g.dom.isPersistent()
    # The whole disk, through another connection to the export.
    g.dom.destroy()
    h = om.connect(prepared['export_uri'])
    mism = om.verify_all(h, orc, 'destination export')
    om.close(h)
    assert not mism, mism


@pytest.mark.timeout(180)
def test_destination_read_before_switchover(libvirt_hosts, make_agent,
                                            make_origin):
    """QEMU's own read at realize, and ours, see the source's newest data.

    Sector 0 is dirty on the source (write_back): only the source agent
    has it.  libvirt starts the destination QEMU inside the migrate call;
    virtio-blk reads sector 0 then (no geometry given), long before the
    switchover.  The destination agent answers it from the source.
    """
    src_host, dst_host = libvirt_hosts
    # Our reader holds the destination export while QEMU opens it: two
    # sessions at once, which only export_clients = any allows.
    src, dst, orc, g, dom_uuid = setup(libvirt_hosts, make_agent,
                                       make_origin, 'write_back',
                                       dst_clients='any')
    g.write(orc, 0x6b, 0, 4096)
    assert src.show('vol1')['dirty_blocks'] > 0
    s, d = src.client(), dst.client()
    prepared = migration.prepare(s, d, 'vol1', 'hybrid')
    mid = prepared['migration_id']
    migration.start(s, d, mid)
    # A reader of our own on the destination export, before the switch.
    h = om.connect(prepared['export_uri'])
    got = h.pread(64 * 1024, 0)
    assert not orc.check(0, bytearray(got)), 'stale data before the switch'
    dst_xml = guest_mod.domain_xml(g.name, dom_uuid, prepared['export_uri'],
                                   'vol1')
    err = Migrator(g, dst_host, dst_xml).start().wait(
        MIGRATE_TIMEOUT_S, lambda: diagnosis(dst_host, g.name, dst, mid))
    assert err is None, err
    # The destination QEMU's probe went to the source as well.
    st = mu.status(dst, mid)
    assert st['state'] == 'connected', st
    assert st['forwarded_reads'] >= 2, st
    migration.switchover(s, d, mid)
    summary = migration.finish(s, d, mid, timeout_s=60)
    assert summary['state'] == 'completed', summary
    g.moved_to(dst_host).check(0x6b, 0, 4096, 'destination after')
    got = h.pread(64 * 1024, 0)
    om.close(h)
    assert not orc.check(0, bytearray(got))


@pytest.mark.timeout(180)
def test_migration_libvirt_aborts(libvirt_hosts, make_agent, make_origin):
    """libvirt gives up: the source keeps the VM, its data and its cache.

    The destination QEMU cannot open its disk (its export is gone), so
    libvirt aborts the migration and rolls the guest back on the source;
    Nova's recover method then aborts the cache migration.  (A stream
    aborted half-way with virDomainAbortJob needs a migration that lasts:
    a guest with no OS sends its memory in well under a second here.)
    """
    src_host, dst_host = libvirt_hosts
    src, dst, orc, g, dom_uuid = setup(libvirt_hosts, make_agent,
                                       make_origin, 'write_back')
    for byte, off, length in BEFORE:
        g.write(orc, byte, off, length)
    before = src.show('vol1')
    assert before['dirty_blocks'] > 0, before
    s, d = src.client(), dst.client()
    prepared = migration.prepare(s, d, 'vol1', 'hybrid')
    mid = prepared['migration_id']
    migration.start(s, d, mid)
    gone = prepared['export_uri'].replace('vol1.sock', 'gone.sock')
    dst_xml = guest_mod.domain_xml(g.name, dom_uuid, gone, 'vol1')
    err = Migrator(g, dst_host, dst_xml).start().wait(
        MIGRATE_TIMEOUT_S, lambda: diagnosis(dst_host, g.name, dst, mid))
    assert err is not None, 'the migration succeeded without a disk'
    print('libvirt: %s' % err)
    # Nova's recover method: abort the cache migration.
    st = migration.abort(s, d, mid)
    assert st['state'] == 'aborted', st
    assert mu.volume_gone(dst, 'vol1'), dst.status()
    assert g.state() == libvirt.VIR_DOMAIN_RUNNING
    after = src.show('vol1')
    assert after['cached_blocks'] > 0, after
    for byte, off, length in BEFORE:
        g.check(byte, off, length, 'source after abort')
    g.write(orc, 0x19, 3 * MiB, 64 * 1024)
    g.check(0x19, 3 * MiB, 64 * 1024, 'source after abort, new write')
    assert g.name not in [x.name() for x in dst_host.conn().listAllDomains()]
