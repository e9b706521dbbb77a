# SPDX-License-Identifier: Apache-2.0
"""Guest disk configuration pointing at the agent's export.

ucache exports each volume over NBD on a unix socket
(``nbd+unix:///NAME?socket=PATH``); libvirt's network disk says so with
``<source protocol='nbd' name='NAME'><host transport='unix'
socket='PATH'/></source>``, which Nova's ``LibvirtConfigGuestDisk`` cannot
express (its hosts are name/port pairs), hence the subclass.  dmcache
exports a device path: a plain block disk.
"""

from lxml import etree
from nova.virt.libvirt import config as vconfig

from nova_ext.virt import exports


class NbdUnixGuestDisk(vconfig.LibvirtConfigGuestDisk):
    """A network disk served by NBD over a unix socket."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.nbd_socket = None

    def format_dom(self):
        dev = super().format_dom()
        source = dev.find('source')
        host = source.makeelement('host', {'transport': 'unix',
                                           'socket': self.nbd_socket})
        source.append(host)
        return dev


def point_at_export(conf, export_uri):
    """Return a copy of disk ``conf`` whose source is the agent export.

    Nothing of the volume's own source stays: an RBD network disk's
    monitors and its ``<auth>`` (the cephx user and libvirt secret) are
    the agent's business, not QEMU's, which opens the export only.
    """
    kind, name, path = exports.parse_export(export_uri)
    conf.auth_username = None
    conf.auth_secret_type = None
    conf.auth_secret_uuid = None
    if kind == 'block':
        conf.source_type = 'block'
        conf.source_path = path
        conf.source_protocol = None
        conf.source_name = None
        conf.source_hosts = []
        conf.source_ports = []
        return conf
    disk = NbdUnixGuestDisk()
    for key, value in vars(conf).items():
        if key not in ('root_name', 'ns_prefix', 'ns_uri'):
            setattr(disk, key, value)
    disk.source_type = 'network'
    disk.source_protocol = 'nbd'
    disk.source_name = name or None
    disk.source_path = None
    disk.source_hosts = []
    disk.source_ports = []
    disk.nbd_socket = path
    disk.driver_format = 'raw'
    return disk


def set_disk_types(domain_xml, types):
    """Give each volume disk of ``domain_xml`` its destination's type.

    Nova's live migration builds the destination's domain XML from the
    source's, replacing each volume disk's ``<source>`` and ``<driver>``
    with the destination's (``nova.virt.libvirt.migration.
    _update_volume_xml``) but keeping the ``<disk type=...>`` of the
    source.  A disk that changes kind on the way -- an fcache NBD export
    here (``network``) becoming the volume's block device on a host
    without fcache, or a dmcache device there (``block``) -- would reach
    libvirt as a network disk with a device source, which it refuses.

    :param types: ``{serial: source_type}`` of the destination's disks.
    """
    doc = etree.XML(domain_xml, etree.XMLParser(remove_blank_text=True))
    for dev in doc.findall('./devices/disk'):
        kind = types.get(dev.findtext('serial'))
        if kind:
            dev.set('type', kind)
    return etree.tostring(doc, encoding='unicode')
