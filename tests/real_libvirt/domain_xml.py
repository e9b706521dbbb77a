# SPDX-License-Identifier: Apache-2.0
"""Print a domain's XML as Nova would give it to libvirt (run in .venv-nova).

The guest is Nova's own config classes; its data disk is what Nova's
libvirt volume driver makes of an attached Cinder volume (the iSCSI/FC
driver, ``LibvirtVolumeDriver``), passed through the fcache driver's
``nova_ext.virt.disk.point_at_export`` -- the code a compute host runs,
not XML written for the test.  Nova and the fcache driver live in
.venv-nova only, python3-libvirt in .venv: the harness runs this as a
program::

    domain_xml.py '{"name": ..., "uuid": ..., "export_uri": ...,
                    "volume_id": ..., "memory_mib": 128}'

or, since importing Nova takes seconds, as one process for a whole run
(``--serve``): a spec a line on stdin, a JSON line on stdout for each,
``{"xml": ...}`` or ``{"error": ...}``.
"""

import json
import sys
import traceback
from unittest import mock

from nova.virt.libvirt import config as vconfig
from nova.virt.libvirt.volume import volume as volume_driver
from oslo_config import cfg

from nova_ext.virt import disk


def volume_disk(volume_id, export_uri, device_path='/dev/sdz'):
    cfg.CONF.set_override('virt_type', 'qemu', group='libvirt')
    # get_config asks the host only for a LUKS secret: the volume has none.
    host = mock.Mock()
    host.find_secret.return_value = None
    drv = volume_driver.LibvirtVolumeDriver(host)
    connection_info = {'driver_volume_type': 'iscsi', 'serial': volume_id,
                       'data': {'device_path': device_path}}
    disk_info = {'bus': 'virtio', 'dev': 'vdb', 'type': 'disk'}
    conf = drv.get_config(connection_info, disk_info)
    return disk.point_at_export(conf, export_uri)


def guest(spec):
    g = vconfig.LibvirtConfigGuest()
    g.virt_type = 'qemu'
    g.name = spec['name']
    g.uuid = spec['uuid']
    g.memory = spec.get('memory_mib', 128) * 1024
    g.vcpus = 1
    g.os_type = 'hvm'
    g.os_mach_type = 'q35'
    g.emulator = '/usr/bin/qemu-system-x86_64'
    g.add_device(volume_disk(spec['volume_id'], spec['export_uri']))
    return g


def serve():
    for line in sys.stdin:
        try:
            out = {'xml': guest(json.loads(line)).to_xml()}
        except Exception:
            out = {'error': traceback.format_exc()}
        sys.stdout.write(json.dumps(out) + '\n')
        sys.stdout.flush()


def main():
    if sys.argv[1:] == ['--serve']:
        serve()
    else:
        print(guest(json.loads(sys.argv[1])).to_xml())


if __name__ == '__main__':
    main()
