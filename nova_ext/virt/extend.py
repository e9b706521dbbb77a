# SPDX-License-Identifier: Apache-2.0
"""Online extend of a cached volume: the guest's disk grows too.

Cinder extends the volume and tells Nova (``volume-extended``); Nova's
libvirt driver has os-brick rescan the device, then asks libvirt to resize
the guest disk it finds at ``device_path`` (os-brick's device) or by the
volume's serial.  For a cached volume three things differ:

1. the agent serves the guest, so it must serve the new size
   (``volume-extend``, after os-brick's rescan or librbd's refresh);
2. the guest disk is the agent's NBD export, not os-brick's device, which
   libvirt would not find among the domain's disks;
3. QEMU cannot grow an NBD node in place (``block_resize`` of one fails
   with "Cannot grow NBD nodes"): the disk's format node is moved onto a
   new NBD node, which asks the export its size afresh
   (:func:`nova_ext.virt.reconnect.reopen`), and then resized, which
   tells the guest (virtio-blk's capacity change).
"""

from oslo_log import log as logging

from nova_ext.virt import reconnect

LOG = logging.getLogger(__name__)


def guest_disk(domain_xml, socket):
    """The disk of ``domain_xml`` on the agent's export ``socket``.

    :returns: one of :func:`nova_ext.virt.reconnect.fcache_disks`, or
        None.
    """
    disks = reconnect.fcache_disks(domain_xml, {socket})
    return disks[0] if disks else None


def grow_guest_disk(domain, disk, size, delay, monitor_command=None):
    """Let the guest of ``domain`` see fcache ``disk`` at ``size`` bytes.

    :param disk: from :func:`guest_disk`.
    :param delay: the new NBD node's ``reconnect-delay`` (the driver's
        ``[fcache] nbd_reconnect_delay``, so that the disk still rides out
        an agent restart).
    :raises reconnect.ReconnectError: QEMU refused the new node; the disk
        keeps the old one and its old size.
    :raises libvirt.libvirtError: the resize failed.
    """
    qmp = reconnect.monitor(domain, monitor_command)
    if not reconnect.reopen(qmp, reconnect.block_nodes(qmp), disk, delay):
        raise reconnect.ReconnectError(
            'QEMU has no node libvirt-%s-storage for the fcache disk on %s'
            % (disk['index'], disk['socket']))
    import libvirt
    domain.blockResize(disk['target'], size,
                       libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)
    LOG.info('fcache disk %s (%s) now %d bytes', disk['target'],
             disk['socket'], size)
