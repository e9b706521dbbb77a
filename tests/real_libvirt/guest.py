"""A domain on one of the libvirt hosts, and the guest disk's I/O.

I/O through the guest disk is qemu-io, run by QEMU itself over QMP's
human-monitor-command (``virDomainQemuMonitorCommand``), on the disk's own
block backend (``-d``: the virtio device, so no second writer needs
``share-rw``).  QEMU prints qemu-io's verdict on its stdout, which libvirt
appends to the domain log: the verdict is read there.
"""

import json
import os
import subprocess
import time

import libvirt
import libvirt_qemu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NOVA_PYTHON = os.path.join(ROOT, '.venv-nova', 'bin', 'python')
HMP = libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP


def domain_xml(name, dom_uuid, export_uri, volume_id):
    """The XML Nova's code gives libvirt for this guest (domain_xml.py)."""
    spec = json.dumps({'name': name, 'uuid': dom_uuid,
                       'export_uri': export_uri, 'volume_id': volume_id})
    res = subprocess.run(
        [NOVA_PYTHON, os.path.join(os.path.dirname(__file__),
                                   'domain_xml.py'), spec],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=ROOT))
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


class Guest(object):
    def __init__(self, host, name, volume_id):
        self.host = host
        self.name = name
        # Nova's volume driver names the disk ua-<volume id>; the block
        # backend is the virtio-blk-pci device's inner virtio device.
        self.qdev = '/machine/peripheral/ua-%s/virtio-backend' % volume_id

    @property
    def dom(self):
        return self.host.conn().lookupByName(self.name)

    def moved_to(self, host):
        self.host = host
        return self

    def state(self):
        return self.dom.state()[0]

    def qmp(self, command, **arguments):
        msg = {'execute': command}
        if arguments:
            msg['arguments'] = arguments
        reply = json.loads(libvirt_qemu.qemuMonitorCommand(
            self.dom, json.dumps(msg), 0))
        assert 'error' not in reply, reply
        return reply['return']

    def qemu_io(self, command, timeout=30):
        """Run qemu-io in QEMU; return what it printed (reply + log)."""
        before = len(self.host.domain_log(self.name))
        reply = libvirt_qemu.qemuMonitorCommand(
            self.dom, 'qemu-io -d %s "%s"' % (self.qdev, command), HMP)
        deadline = time.monotonic() + timeout
        while True:
            out = self.host.domain_log(self.name)[before:]
            if 'ops/sec' in out or 'failed' in out.lower() or reply:
                return reply + out
            if time.monotonic() > deadline:
                raise AssertionError('qemu-io %r on %s printed nothing in '
                                     '%d s' % (command, self.name, timeout))
            time.sleep(0.05)

    def write(self, orc, byte, off, length):
        out = self.qemu_io('write -P 0x%02x %d %d' % (byte, off, length))
        assert 'wrote %d/%d bytes' % (length, length) in out, out
        orc.write(off, bytes([byte]) * length)

    def check(self, byte, off, length, what):
        out = self.qemu_io('read -P 0x%02x %d %d' % (byte, off, length))
        assert 'read %d/%d bytes' % (length, length) in out and \
            'Pattern verification failed' not in out, \
            '%s: read -P 0x%02x %d %d on %s said: %s' % (
                what, byte, off, length, self.host.name, out)

    def wait_state(self, states, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                st = self.state()
            except libvirt.libvirtError:
                st = None
            if st in states:
                return st
            if time.monotonic() > deadline:
                raise AssertionError('%s on %s: state %s, expected %s' % (
                    self.name, self.host.name, st, states))
            time.sleep(0.1)
