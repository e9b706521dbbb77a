# SPDX-License-Identifier: Apache-2.0
"""A shared volume as each compute's iSCSI session shows it: a real disk.

os-brick's iSCSI connector logs in to the target and hands Nova the SCSI
disk the kernel made for the LUN, ``/dev/sdX``; two hosts logged in to one
LUN each have their own disk, both reaching the same bytes.  No iSCSI
initiator can run here (the kernel has no ``iscsi_tcp``), so the tests
replace the connector's ``connect_volume`` -- and only that -- with
:func:`iscsi_connector`, which answers what os-brick would: a block device
in ``/dev`` named like a SCSI disk.  Each is real: :class:`SharedLun`
attaches the volume's file to one loop device per host (``losetup``) and
makes a node for it in ``/dev`` with the loop device's major:minor,
``/dev/sdfc<N>``, the name os-brick would return.  The agent opens it as
any block device (``origin_block_devices = any``: exclusively, refused if
mounted or held).

Two loop devices over one file are one LUN seen twice: both read and write
the file through its page cache (buffered loop devices), so what one
host's agent wrote and flushed is what the other reads once it opens its
disk, and what the test reads from the file.  Above each loop device the
kernel keeps a page cache of its own, as it does above each of two iSCSI
disks.
"""

import errno
import itertools
import os
import stat
import subprocess

import fixtures

# "sdfc" and a number: no SCSI disk is ever named so (the kernel's
# names are letters only), so a node made here cannot shadow a real one.
NODE_PREFIX = '/dev/sdfc'


def _losetup(*args):
    return subprocess.run(['losetup'] + list(args), check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30).stdout.decode().strip()


def _make_node(rdev):
    """A block node for rdev under the first free /dev/sdfc<N>."""
    for n in itertools.count():
        node = '%s%d' % (NODE_PREFIX, n)
        try:
            # mknod refuses an existing name: concurrent runs each get
            # their own.
            os.mknod(node, 0o600 | stat.S_IFBLK, rdev)
            return node
        except FileExistsError:
            continue


def _unlink(path):
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


class SharedLun(fixtures.Fixture):
    """The file ``path`` as the disk each of ``hosts`` connected.

    ``devices[host]``: the node os-brick would have returned on host;
    ``loops[host]``: the loop device behind it.  Cleanup removes the nodes
    and detaches the loop devices (lazily, should something still hold
    one).
    """

    def __init__(self, path, hosts):
        super().__init__()
        self.path = path
        self.hosts = tuple(hosts)

    def _setUp(self):
        self.devices = {}
        self.loops = {}
        for host in self.hosts:
            loop = _losetup('--find', '--show', self.path)
            self.addCleanup(_losetup, '--detach', loop)
            node = _make_node(os.stat(loop).st_rdev)
            self.addCleanup(_unlink, node)
            self.loops[host] = loop
            self.devices[host] = node

    def grow(self, size):
        """Cinder's extend, then each host's rescan: every disk is bigger."""
        os.truncate(self.path, size)
        for loop in self.loops.values():
            _losetup('--set-capacity', loop)

    def hold(self, host):
        """Open host's disk exclusively, as a mount would.

        The agent's open of it fails (EBUSY) until the test ends.
        """
        fd = os.open(self.devices[host], os.O_RDONLY | os.O_EXCL)
        self.addCleanup(os.close, fd)


def host_of(computes, connector):
    """The compute whose iSCSI volume driver owns ``connector``.

    Nova makes one volume driver per driver type and compute, and it makes
    the os-brick connector: which host connects is known from that, as
    CONF.host is not (the computes of a test share one CONF).
    """
    for name, compute in computes.items():
        driver = compute.driver.volume_drivers.get('iscsi')
        if driver is not None and driver.connector is connector:
            return name
    raise AssertionError('connect_volume on a connector of no compute')


def _device_size(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def iscsi_connector(test, device):
    """Replace os-brick's ISCSIConnector.connect_volume in ``test``.

    ``device(host, connection_properties)`` returns the node of the disk
    host sees for the volume; the connector answers as os-brick does for a
    single-path LUN.  ``extend_volume`` answers what os-brick's rescan
    finds: the size of the host's disk now (a test grows the LUN with
    :meth:`SharedLun.grow`).  disconnect_volume stays the mock of Nova's
    OSBrickFixture: the disks go when the test ends.
    """
    def connect_volume(connector, connection_properties, *args, **kwargs):
        host = host_of(test.computes, connector)
        return {'type': 'block',
                'path': device(host, connection_properties)}

    def extend_volume(connector, connection_properties, *args, **kwargs):
        host = host_of(test.computes, connector)
        return _device_size(device(host, connection_properties))
    for name, fn in (('connect_volume', connect_volume),
                     ('extend_volume', extend_volume)):
        test.useFixture(fixtures.MonkeyPatch(
            'os_brick.initiator.connectors.iscsi.ISCSIConnector.' + name,
            fn))
