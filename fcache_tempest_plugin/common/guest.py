# SPDX-License-Identifier: Apache-2.0
"""Known data on a guest's disk, through SSH.

Works with any ``exec_command(cmd) -> str`` client (Tempest's
RemoteClient) and a busybox guest such as CirrOS: dd, md5sum, sync.
"""

import re

_MD5 = re.compile(r'^([0-9a-f]{32})\b')
PATTERN = '/tmp/fcache-pattern'


class GuestDataError(Exception):
    """A guest command did not print what it should."""


def _checksum(output):
    match = _MD5.match(output.strip())
    if not match:
        raise GuestDataError('expected an md5sum line from the guest, '
                             'got %r' % output)
    return match.group(1)


class GuestDisk(object):
    """``size_mb`` MiB at the start of block device ``device`` of a guest.

    :param ssh: an object with ``exec_command(cmd)`` returning stdout and
        raising on a non-zero exit status
    :param device: the device node in the guest, e.g. ``/dev/vdb``
    """

    def __init__(self, ssh, device, size_mb, sudo='sudo '):
        if not re.match(r'^/dev/[a-z0-9]+$', device):
            raise ValueError('not a plain device node: %r' % device)
        if size_mb < 1:
            raise ValueError('size_mb must be at least 1, got %r' % size_mb)
        self.ssh = ssh
        self.device = device
        self.size_mb = int(size_mb)
        self.sudo = sudo

    def write_random(self):
        """Write random data, flushed to the device; return its md5."""
        # The pattern is made in a file first so that its checksum is the
        # data's, not what the device later returns.
        known = _checksum(self.ssh.exec_command(
            'dd if=/dev/urandom of=%s bs=1M count=%d 2>/dev/null && '
            'md5sum %s' % (PATTERN, self.size_mb, PATTERN)))
        self.ssh.exec_command(
            '%sdd if=%s of=%s bs=1M conv=notrunc,fsync 2>/dev/null && rm -f %s'
            % (self.sudo, PATTERN, self.device, PATTERN))
        return known

    def read_checksum(self):
        """md5 of what the device returns, past the guest's page cache."""
        self.ssh.exec_command(
            "%ssh -c 'sync; echo 3 > /proc/sys/vm/drop_caches'" % self.sudo)
        return _checksum(self.ssh.exec_command(
            '%sdd if=%s bs=1M count=%d 2>/dev/null | md5sum'
            % (self.sudo, self.device, self.size_mb)))
