# SPDX-License-Identifier: Apache-2.0
"""The Tempest scenario's guest data commands, run for real in a shell.

No guest runs here: a local shell stands in for the guest's SSH session,
with a file in place of the guest's /dev/vdb and of drop_caches.  The
commands themselves (dd, md5sum, sync) are the ones the guest runs.
"""

import hashlib
import os
import subprocess

import pytest

from fcache_tempest_plugin.common import guest


class LocalGuest(object):
    """``exec_command`` as Tempest's RemoteClient: stdout, or raise."""

    def __init__(self, tmpdir):
        self.disk = os.path.join(tmpdir, 'vdb')
        self.drop_caches = os.path.join(tmpdir, 'drop_caches')
        self.tmp = tmpdir
        with open(self.disk, 'wb') as f:
            f.truncate(8 << 20)

    def exec_command(self, cmd):
        cmd = (cmd.replace('/dev/vdb', self.disk)
               .replace('/proc/sys/vm/drop_caches', self.drop_caches)
               .replace(guest.PATTERN, os.path.join(self.tmp, 'pattern')))
        r = subprocess.run(['sh', '-c', cmd], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=60)
        if r.returncode:
            raise RuntimeError('%s: exit %d: %s' % (cmd, r.returncode,
                                                    r.stderr))
        return r.stdout


@pytest.fixture
def vm(tmp_path):
    return LocalGuest(str(tmp_path))


def test_written_data_reads_back_with_its_checksum(vm):
    disk = guest.GuestDisk(vm, '/dev/vdb', 2, sudo='')
    known = disk.write_random()
    with open(vm.disk, 'rb') as f:
        data = f.read(2 << 20)
    assert hashlib.md5(data).hexdigest() == known
    assert disk.read_checksum() == known
    # The disk keeps its size; the pattern file is gone.
    assert os.path.getsize(vm.disk) == 8 << 20
    assert not os.path.exists(os.path.join(vm.tmp, 'pattern'))
    with open(vm.drop_caches) as f:
        assert f.read().strip() == '3'


def test_two_writes_are_two_patterns(vm):
    disk = guest.GuestDisk(vm, '/dev/vdb', 1, sudo='')
    assert disk.write_random() != disk.write_random()


def test_one_changed_byte_changes_the_checksum(vm):
    disk = guest.GuestDisk(vm, '/dev/vdb', 1, sudo='')
    known = disk.write_random()
    with open(vm.disk, 'r+b') as f:
        f.seek(12345)
        byte = f.read(1)
        f.seek(12345)
        f.write(bytes([byte[0] ^ 1]))
    assert disk.read_checksum() != known


class Garbled(object):
    def exec_command(self, cmd):
        return 'md5sum: not found\n'


def test_a_guest_without_md5sum_is_a_clear_error():
    disk = guest.GuestDisk(Garbled(), '/dev/vdb', 1)
    with pytest.raises(guest.GuestDataError,
                       match="expected an md5sum line from the guest, "
                             "got 'md5sum: not found"):
        disk.read_checksum()


@pytest.mark.parametrize('device', ['vdb', '/dev/vdb; rm -rf /',
                                    '/dev/../etc/passwd', ''])
def test_only_plain_device_nodes(device):
    with pytest.raises(ValueError, match='not a plain device node'):
        guest.GuestDisk(Garbled(), device, 1)


def test_size_at_least_one_mib():
    with pytest.raises(ValueError, match='size_mb must be at least 1'):
        guest.GuestDisk(Garbled(), '/dev/vdb', 0)
