# SPDX-License-Identifier: Apache-2.0
"""Online extend under a running guest: QEMU sees the new size.

A QEMU guest under a real libvirt daemon, its disk the XML Nova's code
makes for an fcache volume.  The origin grows (as after Cinder's extend
and os-brick's rescan), the agent serves the new size, and the driver's
steps (``nova_ext.virt.extend``: find the guest disk on the agent's
export, move it onto a new NBD node, ``virDomainBlockResize``)
make the guest's disk the new size: QEMU's device reports it, and the
guest writes and reads past the old end.  The disk still rides out an
agent restart afterwards, and the origin holds every write.
"""

import os
import uuid

import libvirt
import pytest

from nova_ext.virt import extend

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

from . import guest as guest_mod

MiB = mu.MiB
OLD = mu.VOLUME_SIZE
NEW = OLD + 16 * MiB
DELAY_S = 30


def device_size(g):
    """What QEMU's virtio-blk device has as its disk's size."""
    for dev in g.qmp('query-block'):
        if dev.get('qdev') == g.qdev:
            return dev['inserted']['image']['virtual-size']
    raise AssertionError('no block device %s in QEMU' % g.qdev)


@pytest.mark.timeout(300)
@pytest.mark.parametrize('policy', ['write_back', 'write_through'])
def test_guest_sees_the_extended_volume(libvirt_hosts, make_agent,
                                        make_origin, policy):
    host = libvirt_hosts[0]
    host.clean_domains()
    agent = make_agent(name='agent', export_group='libvirt-qemu',
                       writeback_interval_ms=3600000,
                       dirty_high_percent=100).start()
    # os-brick's device: a file the agent opens by its path.
    origin = make_origin(OLD, nbd=False)
    orc = om.Oracle(origin.content)
    res = agent.attach('vol1', origin.path, cache_size=mu.VOLUME_CACHE,
                       write_policy=policy)
    name = 'vm-%s' % uuid.uuid4().hex[:8]
    host.conn().defineXML(guest_mod.domain_xml(
        name, str(uuid.uuid4()), res['export_uri'], 'vol1')).create()
    g = guest_mod.Guest(host, name, 'vol1')
    g.wait_state((libvirt.VIR_DOMAIN_RUNNING,))
    g.write(orc, 0x11, OLD - MiB, MiB)
    assert device_size(g) == OLD

    os.truncate(origin.path, NEW)
    orc.grow(NEW)
    assert agent.client().extend_volume('vol1')['size'] == NEW
    # The agent grew, QEMU's node did not: an NBD node cannot grow.
    assert device_size(g) == OLD

    socket = res['export_uri'].split('socket=', 1)[1]
    disk = extend.guest_disk(g.dom.XMLDesc(0), socket)
    assert disk is not None and disk['target'] == 'vdb', disk
    extend.grow_guest_disk(g.dom, disk, NEW, DELAY_S)
    assert device_size(g) == NEW

    g.check(0x11, OLD - MiB, MiB, 'the old end after the extend')
    g.check(0x00, OLD, NEW - OLD, 'the extension, never written')
    g.write(orc, 0x22, OLD - 64 * 1024, 128 * 1024)
    g.write(orc, 0x33, NEW - MiB, MiB)
    g.check(0x33, NEW - MiB, MiB, 'the new end')

    # The new node kept the reconnect delay: an agent crash costs the
    # guest nothing (without it the first write fails,
    # test_agent_restart.test_without_the_delay_a_write_fails).
    agent.kill()
    agent.start()
    g.write(orc, 0x44, NEW - 2 * MiB, MiB)
    g.check(0x33, NEW - MiB, MiB, 'the new end after an agent restart')
    assert g.state() == libvirt.VIR_DOMAIN_RUNNING
    g.dom.destroy()
    agent.detach('vol1')
    mism = om.compare(orc, origin.read_file(), 'origin after the detach')
    assert not mism, mism
