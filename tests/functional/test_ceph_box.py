# SPDX-License-Identifier: Apache-2.0
"""The Ceph box (tools/ceph-box.sh) is a real cluster with cephx.

The RBD origin tests rely on it: client.cinder writes and reads images in
the pool volumes through librbd; a client without the right key is
refused, and client.cinder has no rights beyond its pool; the OSD keeps
its data on disk across a SIGKILL, and while it is dead no I/O succeeds.
"""

import os
import random
import subprocess
import time

import rados
import rbd

from . import ceph

ceph_box = ceph.ceph_box

MiB = 1 << 20


def _pattern(n, seed):
    return random.Random(seed).randbytes(n)


def test_cinder_writes_and_reads_back(ceph_box):
    ceph_box.create_image('rw', 64 * MiB)
    # 4 MiB starting 512 bytes before the second object's end: it spans
    # two objects of 4 MiB, neither write aligned to one.
    offset = 8 * MiB - 512
    data = _pattern(4 * MiB, 1)
    ceph_box.write_image('rw', data, offset)

    expected = bytearray(64 * MiB)
    expected[offset:offset + len(data)] = data
    image = ceph_box.image_bytes('rw')
    assert len(image) == 64 * MiB
    assert image == expected

    # librbd reads the same, over msgr2 in secure mode (the agent's
    # default) and with only mon_host and the keyring to go by.
    with ceph_box.client(ms_client_mode='secure',
                         ms_mon_client_mode='secure') as cluster:
        with cluster.open_ioctx(ceph_box.pool) as io:
            with rbd.Image(io, 'rw', read_only=True) as img:
                assert img.read(offset, len(data)) == data
                assert img.read(0, 4096) == bytes(4096)
    assert 'rw' in ceph_box.list_images()
    ceph_box.remove_image('rw')
    assert 'rw' not in ceph_box.list_images()


def test_new_images_have_exclusive_lock(ceph_box):
    ceph_box.create_image('features', 4 * MiB)
    try:
        info = ceph_box.image_info('features')
        assert 'exclusive-lock' in info['features'], info
        assert info['size'] == 4 * MiB
    finally:
        ceph_box.remove_image('features')


def _assert_refused(ceph_box, **kwargs):
    started = time.monotonic()
    try:
        with ceph_box.client(timeout=2, **kwargs):
            pass
    except rados.Error as e:
        # The mon answers a wrong key by not letting the client in; it
        # gives up at client_mount_timeout.
        assert isinstance(e, (rados.TimedOut, rados.PermissionError)), e
    else:
        raise AssertionError('client %r got in' % (kwargs,))
    assert time.monotonic() - started < 15


def test_cephx_refuses_clients_without_the_key(ceph_box, tmp_path):
    # The right key gets in (the refusals below are the key's doing).
    with ceph_box.client(timeout=3) as cluster:
        assert cluster.get_fsid()

    wrong = tmp_path / 'wrong.keyring'
    key = subprocess.run(['ceph-authtool', '--gen-print-key'],
                         capture_output=True, text=True,
                         check=True).stdout.strip()
    wrong.write_text('[client.cinder]\n\tkey = %s\n' % key)
    _assert_refused(ceph_box, keyring=str(wrong))

    empty = tmp_path / 'empty.keyring'
    empty.write_text('')
    _assert_refused(ceph_box, keyring=str(empty))

    # A client that does not even try cephx.
    _assert_refused(ceph_box, auth_client_required='none',
                    keyring=str(tmp_path / 'missing.keyring'))

    # The rbd command, as a user with no key anywhere.
    res = ceph_box.rbd('ls', ceph_box.pool, user='nobody', timeout=3)
    assert res.returncode != 0, res


def test_cinder_has_no_rights_beyond_its_pool(ceph_box):
    with ceph_box.client('admin') as admin:
        ret, _, status = admin.mon_command(
            '{"prefix": "osd pool create", "pool": "other"}', b'')
        assert ret == 0, status
    with ceph_box.client() as cluster:
        ret, _, status = cluster.mon_command(
            '{"prefix": "osd pool create", "pool": "mine"}', b'')
        assert ret != 0, status
        with cluster.open_ioctx('other') as io:
            try:
                io.write_full('obj', b'x')
            except rados.PermissionError:
                pass
            else:
                raise AssertionError('client.cinder wrote to pool other')
        with cluster.open_ioctx(ceph_box.pool) as io:
            io.write_full('obj', b'x')
            assert io.read('obj') == b'x'
            io.remove_object('obj')


def test_osd_death_and_return(ceph_box):
    ceph_box.create_image('origin', 16 * MiB)
    data = _pattern(4 * MiB, 2)
    ceph_box.write_image('origin', data, 3 * MiB)
    before = ceph_box.image_bytes('origin')
    assert before[3 * MiB:7 * MiB] == data

    # A client with the image open before the death, as an agent's origin
    # would be: it reads again, the same data, once the OSD is back.
    with ceph_box.client(timeout=3) as cluster:
        with cluster.open_ioctx(ceph_box.pool) as io:
            with rbd.Image(io, 'origin', read_only=True) as img:
                assert img.read(3 * MiB, 4096) == data[:4096]
                ceph_box.kill_osd()
                try:
                    started = time.monotonic()
                    try:
                        img.read(3 * MiB, len(data))
                    except (rbd.Timeout, rados.TimedOut):
                        pass
                    else:
                        raise AssertionError('read the image, its OSD dead')
                    assert time.monotonic() - started < 10
                    res = ceph_box.rbd('export', '%s/origin' % ceph_box.pool,
                                       os.devnull, timeout=3)
                    assert res.returncode != 0, res
                finally:
                    ceph_box.start_osd()
                assert img.read(3 * MiB, len(data)) == data
    assert ceph_box.image_bytes('origin') == before

    # And the OSD takes writes again.
    ceph_box.write_image('origin', b'\xa5' * 4096, 0)
    assert ceph_box.image_bytes('origin')[:4096] == b'\xa5' * 4096
    ceph_box.remove_image('origin')
