# SPDX-License-Identifier: Apache-2.0
"""A domain on one of the libvirt hosts, and the guest disk's I/O.

I/O through the guest disk is qemu-io, run by QEMU itself over QMP's
human-monitor-command (``virDomainQemuMonitorCommand``), on the disk's own
block backend (``-d``: the virtio device, so no second writer needs
``share-rw``).  QEMU prints qemu-io's verdict on its stdout, which libvirt
appends to the domain log: the verdict is read there.
"""

import atexit
import json
import os
import select
import subprocess
import tempfile
import time

import libvirt
import libvirt_qemu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NOVA_PYTHON = os.path.join(ROOT, '.venv-nova', 'bin', 'python')
HMP = libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP


class _XmlServer(object):
    """domain_xml.py --serve: Nova imported once for the whole run."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile(mode='w+')
        self.proc = subprocess.Popen(
            [NOVA_PYTHON, os.path.join(os.path.dirname(__file__),
                                       'domain_xml.py'), '--serve'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, text=True,
            env=dict(os.environ, PYTHONPATH=ROOT))
        atexit.register(self.close)

    def stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read()[-2000:]

    def ask(self, spec, timeout=60):
        self.proc.stdin.write(json.dumps(spec) + '\n')
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ''
        if not line:
            self.close()
            raise AssertionError('domain_xml.py --serve: no answer in %d s '
                                 '(exit status %s): %s' % (
                                     timeout, self.proc.returncode,
                                     self.stderr_tail()))
        reply = json.loads(line)
        assert 'error' not in reply, reply['error'][-2000:]
        return reply['xml']

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_xml_server = None


def domain_xml(name, dom_uuid, export_uri, volume_id):
    """The XML Nova's code gives libvirt for this guest (domain_xml.py)."""
    global _xml_server
    if _xml_server is None or _xml_server.proc.poll() is not None:
        _xml_server = _XmlServer()
    return _xml_server.ask({'name': name, 'uuid': dom_uuid,
                            'export_uri': export_uri,
                            'volume_id': volume_id})


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
