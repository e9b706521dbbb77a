# SPDX-License-Identifier: Apache-2.0
"""nova_ext.virt.rbd: Cinder's RBD connection_info as an agent origin."""

import base64
import grp
import os
import stat

import pytest

from nova_ext import exception
from nova_ext.virt import rbd

VOLUME = '0f3c9a52-6b1d-4e8f-a2c7-5d9e1b3f7a60'
KEY = b'\x01\x02secret-bytes\xff'   # a ceph secret's value: raw bytes
SECRET = '5c1e7a9d-3b2f-4068-9d2a-7c1e5a9d3b2f'


def _info(**data):
    base = {'name': 'volumes/volume-%s' % VOLUME,
            'hosts': ['10.0.0.1'], 'ports': ['6789'],
            'cluster_name': 'ceph', 'auth_enabled': True,
            'auth_username': 'cinder', 'secret_type': 'ceph',
            'secret_uuid': SECRET, 'volume_id': VOLUME,
            'cacheable': True}
    base.update(data)
    return {'driver_volume_type': 'rbd', 'serial': VOLUME, 'data': base}


def test_is_rbd_only_for_a_network_disk():
    assert rbd.is_rbd(_info())
    # os-brick's RBD connector gives a device: the usual block origin.
    assert not rbd.is_rbd(_info(device_path='/dev/rbd0'))
    assert not rbd.is_rbd({'driver_volume_type': 'iscsi',
                           'data': {'device_path': '/dev/sdb'}})
    assert not rbd.is_rbd({'driver_volume_type': 'rbd', 'data': None})
    assert not rbd.is_rbd(None)


def test_auth_from_cinder():
    src = rbd.source(_info(), rbd_user='nova', rbd_secret_uuid='other')
    assert (src.pool, src.image) == ('volumes', 'volume-' + VOLUME)
    assert (src.user, src.secret_uuid) == ('cinder', SECRET)
    assert src.secret_source == rbd.FROM_CINDER
    assert src.monitors == [('10.0.0.1', '6789')]
    assert rbd.origin_string(src, '/run/fcache/ceph/%s.keyring' % VOLUME) \
        == ('rbd:volumes/volume-%s:id=cinder:keyring=/run/fcache/ceph/'
            '%s.keyring:mon_host=10.0.0.1' % (VOLUME, VOLUME))


def test_auth_without_cinder_secret_takes_nova_conf_user_and_secret():
    # A connection from before Cinder gave secret_uuid (Nova's fallback).
    src = rbd.source(_info(secret_uuid=None), rbd_user='nova',
                     rbd_secret_uuid='nova-secret')
    assert (src.user, src.secret_uuid) == ('nova', 'nova-secret')
    assert src.secret_source == rbd.FROM_NOVA


def test_auth_disabled_but_nova_conf_secret_is_used():
    src = rbd.source(_info(auth_enabled=False, auth_username=None,
                           secret_uuid=None),
                     rbd_user='nova', rbd_secret_uuid='nova-secret')
    assert (src.user, src.secret_uuid) == ('nova', 'nova-secret')


def test_auth_disabled_no_id_no_keyring():
    src = rbd.source(_info(auth_enabled=False, auth_username=None,
                           secret_uuid=None))
    assert (src.user, src.secret_uuid) == (None, None)
    origin = rbd.origin_string(src)
    assert origin == ('rbd:volumes/volume-%s:mon_host=10.0.0.1'
                      % VOLUME)
    assert 'id=' not in origin and 'keyring=' not in origin


def test_auth_enabled_with_no_secret_anywhere_names_the_option():
    with pytest.raises(exception.RbdKeyUnavailable) as err:
        rbd.source(_info(secret_uuid=None), rbd_user='nova')
    assert VOLUME in str(err.value)
    assert '[libvirt] rbd_secret_uuid' in str(err.value)


def test_several_monitors_and_ipv6():
    src = rbd.source(_info(hosts=['10.0.0.1', 'mon2.example', '[fd00::3]',
                                  'fd00::4'],
                           ports=['6789', 3300, '6789', '6789']))
    assert src.monitors == [('10.0.0.1', '6789'), ('mon2.example', '3300'),
                            ('fd00::3', '6789'), ('fd00::4', '6789')]
    origin = rbd.origin_string(src)
    assert origin.endswith(
        ':mon_host=10.0.0.1;mon2.example\\:3300;'
        '[fd00\\:\\:3];[fd00\\:\\:4]')
    # Every ':' that is not an option separator is escaped.
    unescaped = origin.replace('\\:', '')
    assert unescaped.count(':') == 3   # rbd:, :id=, :mon_host=


def test_monitor_without_port_and_no_monitors():
    src = rbd.source(_info(hosts=['mon1', 'mon2'], ports=['6789']))
    assert src.monitors == [('mon1', '6789'), ('mon2', None)]
    # msgr1's port goes: librados then tries msgr2 (3300) too.
    assert rbd.origin_string(src).endswith(':mon_host=mon1;mon2')
    src = rbd.source(_info(hosts=[], ports=[]))
    assert 'mon_host' not in rbd.origin_string(src)


def test_names_with_separators_are_escaped():
    src = rbd.Source('po:ol', 'im@ge/x\\y', [], None, None, None)
    assert rbd.origin_string(src) == 'rbd:po\\:ol/im\\@ge\\/x\\\\y'
    src = rbd.Source('p', 'i', [], 'u', 's', None)
    assert rbd.origin_string(src, '/a:b/k') == \
        'rbd:p/i:id=u:keyring=/a\\:b/k'


@pytest.mark.parametrize('data', [
    {'name': 'no-pool'},
    {'name': '/image'},
    {'name': None},
    {'hosts': ['10.0.0.1;mon_host=evil']},
    {'hosts': ['mon 1']},
    {'ports': ['67x9']},
    {'ports': ['70000']},
    {'auth_username': 'cinder]\n\tkey = x'},
    {'auth_username': 'cin:der'},
    {'auth_username': None},
])
def test_what_the_origin_or_keyring_cannot_carry_is_refused(data):
    with pytest.raises(exception.InvalidArgument):
        rbd.source(_info(**data))


def test_keyring_text_is_the_base64_key():
    text = rbd.keyring_text('cinder', KEY)
    assert text == '[client.cinder]\n\tkey = %s\n' % (
        base64.b64encode(KEY).decode())


@pytest.mark.parametrize('vol', ['../etc/passwd', '.hidden', 'a/b', '',
                                 None])
def test_keyring_name_is_a_plain_file_name(vol):
    with pytest.raises(exception.InvalidArgument):
        rbd.keyring_name(vol)


def test_volume_id_from_data_else_serial():
    assert rbd.volume_id(_info()) == VOLUME
    info = _info()
    del info['data']['volume_id']
    info['serial'] = 'from-serial'
    assert rbd.volume_id(info) == 'from-serial'


def test_write_keyring_mode_content_and_removal(tmp_path):
    directory = str(tmp_path / 'ceph')
    name = rbd.keyring_name(VOLUME)
    path = rbd.write_keyring(directory, name, 'first\n')
    assert path == os.path.join(directory, VOLUME + '.keyring')
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    # Rewritten whole (a reconnect), no temporary left behind.
    rbd.write_keyring(directory, name, 'second\n')
    with open(path) as f:
        assert f.read() == 'second\n'
    assert os.listdir(directory) == [name]
    assert rbd.remove_keyring(directory, name) is True
    assert os.listdir(directory) == []
    assert rbd.remove_keyring(directory, name) is False
    assert rbd.remove_keyring(str(tmp_path / 'absent'), name) is False


def test_write_keyring_replaces_a_planted_link(tmp_path):
    victim = tmp_path / 'victim'
    victim.write_text('untouched')
    directory = tmp_path / 'ceph'
    directory.mkdir(mode=0o700)
    (directory / 'v.keyring').symlink_to(victim)
    rbd.write_keyring(str(directory), 'v.keyring', 'key\n')
    assert victim.read_text() == 'untouched'
    assert not os.path.islink(directory / 'v.keyring')
    assert (directory / 'v.keyring').read_text() == 'key\n'


def test_keyring_dir_that_is_a_link_or_world_writable_is_refused(tmp_path):
    real = tmp_path / 'real'
    real.mkdir()
    os.symlink(real, tmp_path / 'link')
    with pytest.raises(OSError):
        rbd.write_keyring(str(tmp_path / 'link'), 'v.keyring', 'key\n')
    assert list(real.iterdir()) == []
    open_dir = tmp_path / 'open'
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(OSError):
        rbd.write_keyring(str(open_dir), 'v.keyring', 'key\n')
    assert list(open_dir.iterdir()) == []
    with pytest.raises(exception.InvalidArgument):
        rbd.write_keyring('relative/dir', 'v.keyring', 'key\n')


def test_keyring_group_makes_it_0640(tmp_path):
    group = grp.getgrgid(os.getegid()).gr_name
    directory = str(tmp_path / 'ceph')
    path = rbd.write_keyring(directory, 'v.keyring', 'key\n', group=group)
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_gid == os.getegid()
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o750
    with pytest.raises(exception.InvalidArgument):
        rbd.write_keyring(directory, 'w.keyring', 'key\n',
                          group='no-such-group-fcache')


def test_modes_whatever_the_umask(tmp_path):
    group = grp.getgrgid(os.getegid()).gr_name
    old = os.umask(0o077)
    try:
        path = rbd.write_keyring(str(tmp_path / 'ceph'), 'v.keyring',
                                 'key\n', group=group)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(tmp_path / 'ceph').st_mode) == 0o750
