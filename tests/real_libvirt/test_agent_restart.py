# SPDX-License-Identifier: Apache-2.0
"""The agent restarts under a running guest: no I/O error, nothing lost.

A QEMU guest under a real libvirt daemon, its disk the XML Nova's code
makes for an fcache volume (domain_xml.py), after the driver's
``nova_ext.virt.reconnect.set_delay`` -- libvirt 9.0 cannot put QEMU's
NBD ``reconnect-delay`` in the XML.  The agent is killed (``kill -9``, as
a crash) or stopped (SIGTERM, as an upgrade) and started again, while the
guest writes and reads: every request succeeds once the agent is back,
every pattern reads back, the cache is warm, a write_back volume's
write-back (held by the restart, doc/reference/ucache.rst) goes on once QEMU
has reconnected, and after the detach the origin holds every write.

Without the delay the first write after the restart fails: the test
shows it too (``test_without_the_delay_a_write_fails``), so that a QEMU
or libvirt that changes either way is noticed.
"""

import os
import threading
import time
import uuid

import libvirt
import libvirt_qemu
import pytest

from nova_ext.virt import reconnect

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import guest as guest_mod

MiB = mu.MiB
VOLUME_SIZE = mu.VOLUME_SIZE
VOLUME_CACHE = mu.VOLUME_CACHE
DELAY_S = 30


def start_guest(host, make_agent, make_origin, policy):
    host.clean_domains()
    agent = make_agent(name='agent', export_group='libvirt-qemu',
                       writeback_interval_ms=3600000,
                       dirty_high_percent=100).start()
    origin = make_origin(VOLUME_SIZE)
    orc = om.Oracle(origin.content)
    res = agent.attach('vol1', origin.uri, cache_size=VOLUME_CACHE,
                       write_policy=policy)
    name = 'vm-%s' % uuid.uuid4().hex[:8]
    xml = guest_mod.domain_xml(name, str(uuid.uuid4()), res['export_uri'],
                               'vol1')
    host.conn().defineXML(xml).create()
    g = guest_mod.Guest(host, name, 'vol1')
    g.wait_state((libvirt.VIR_DOMAIN_RUNNING,))
    sock = res['export_uri'].split('socket=', 1)[1]
    return agent, origin, orc, g, sock


def nbd_nodes(g):
    """The names of the NBD nodes QEMU has."""
    nodes = g.qmp('query-named-block-nodes', flat=True)
    return sorted(n['node-name'] for n in nodes if n['drv'] == 'nbd')


class Background(object):
    """One qemu-io command in a thread: it waits while the agent is down."""

    def __init__(self, g, command):
        self.out = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(g, command),
                                       daemon=True)
        self.thread.start()

    def _run(self, g, command):
        try:
            self.out = g.qemu_io(command, timeout=DELAY_S + 30)
        except Exception as exc:
            self.error = exc

    def join(self):
        self.thread.join(DELAY_S + 40)
        assert not self.thread.is_alive(), 'qemu-io never returned'
        assert self.error is None, self.error
        return self.out


@pytest.mark.timeout(300)
@pytest.mark.parametrize('policy', ['write_back', 'write_through'])
def test_guest_rides_out_agent_restarts(libvirt_hosts, make_agent,
                                        make_origin, policy):
    host = libvirt_hosts[0]
    agent, origin, orc, g, sock = start_guest(host, make_agent, make_origin,
                                              policy)
    before = nbd_nodes(g)
    assert reconnect.set_delay(g.dom, [sock], DELAY_S) == 1
    # libvirt's own node name again, no temporary node left behind.
    assert nbd_nodes(g) == before == ['libvirt-1-storage'], nbd_nodes(g)

    patterns = [(0x11, 0, MiB), (0x22, 3 * MiB, 512 * 1024)]
    for byte, off, length in patterns:
        g.write(orc, byte, off, length)

    for how in ('kill', 'stop'):
        cached = agent.show('vol1')['cached_blocks']
        assert cached > 0
        if how == 'kill':
            agent.kill()                # SIGKILL: a crash
        else:
            agent.stop()                # SIGTERM: an upgrade
        # The guest writes and reads while no agent serves its disk.
        byte = 0x33 if how == 'kill' else 0x44
        off = 6 * MiB if how == 'kill' else 9 * MiB
        writer = Background(g, 'write -P 0x%02x %d %d' % (byte, off, MiB))
        reader = Background(g, 'read -P 0x11 0 %d' % MiB)
        time.sleep(2)
        agent.start()
        out = writer.join()
        assert 'wrote %d/%d bytes' % (MiB, MiB) in out, out
        orc.write(off, bytes([byte]) * MiB)
        out = reader.join()
        assert 'read %d/%d bytes' % (MiB, MiB) in out and \
            'Pattern verification failed' not in out, out
        patterns.append((byte, off, MiB))
        for b, o, n in patterns:
            g.check(b, o, n, 'after the agent\'s %s' % how)
        # Warm: the blocks cached before came back (and more were read).
        show = agent.show('vol1')
        assert show['cached_blocks'] >= cached, (cached, show)
        if policy == 'write_back':
            # The restart held the write-back of the dirty blocks it found
            # (they would be stale had the guest been evacuated); QEMU
            # reconnecting claimed the volume, and the write-back goes on.
            assert show['writeback'] == 'running', show
            assert 'a client opened its export: the write-back' in \
                agent.run_log()
    assert g.state() == libvirt.VIR_DOMAIN_RUNNING
    g.dom.destroy()
    agent.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin after the detach')
    assert not mism, mism


@pytest.mark.timeout(120)
def test_without_the_delay_a_write_fails(libvirt_hosts, make_agent,
                                         make_origin):
    """What set_delay prevents, on this QEMU and libvirt."""
    host = libvirt_hosts[0]
    agent, origin, orc, g, sock = start_guest(host, make_agent, make_origin,
                                              'write_through')
    g.write(orc, 0x55, 0, MiB)
    agent.kill()
    agent.start()
    out = g.qemu_io('write -P 0x66 %d %d' % (MiB, MiB))
    assert 'wrote' not in out or 'failed' in out.lower(), out
    g.dom.destroy()
    agent.detach('vol1')
    assert libvirt_qemu  # the module the driver uses is the harness's


def test_only_fcache_disks_are_touched():
    xml = """<domain><devices>
      <disk type='network'><driver discard='unmap'/>
        <source protocol='nbd' name='v' index='2'>
          <host transport='unix' socket='/run/fcache/exports/v.sock'/>
        </source></disk>
      <disk type='network'><source protocol='nbd' index='3'>
          <host transport='unix' socket='/elsewhere.sock'/></source></disk>
      <disk type='network'><source protocol='rbd' name='p/i' index='4'/>
      </disk>
      <disk type='file'><source file='/x.img' index='5'/></disk>
    </devices></domain>"""
    disks = reconnect.fcache_disks(xml, {'/run/fcache/exports/v.sock'})
    assert disks == [{'index': '2', 'socket': '/run/fcache/exports/v.sock',
                      'target': None, 'export': 'v', 'discard': 'unmap'}]
    assert os.path.basename(__file__)
