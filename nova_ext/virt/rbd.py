# SPDX-License-Identifier: Apache-2.0
"""Ceph RBD volumes as fcache-agent origins.

Cinder's RBD driver gives Nova a network disk, not a device: its
connection_info (``driver_volume_type`` ``rbd``) has ``data`` with

``name``
    ``POOL/IMAGE``;
``hosts``, ``ports``
    the monitors (an IPv6 host without brackets);
``auth_enabled``, ``auth_username``, ``secret_type``, ``secret_uuid``
    cephx: the user, and the libvirt secret whose value is its key.

Nova's ``LibvirtNetVolumeDriver`` resolves the user and the secret with
``[libvirt] rbd_user`` and ``rbd_secret_uuid`` of nova.conf as fallbacks;
:func:`source` resolves them the same way.  The agent takes QEMU's own
filename syntax (:func:`origin_string`)::

    rbd:POOL/IMAGE[:id=USER][:keyring=PATH][:mon_host=HOST\\:PORT;...]

and reads the key from a keyring file under its ``origin_rbd_dirs``,
never from its control socket: nova-compute writes that file
(:func:`write_keyring`), one per volume, from the libvirt secret, and
removes it once the volume has left the host (:func:`remove_keyring`).
The key itself goes nowhere else: not into connection_info, logs or RPC.

Nothing here imports Nova: the driver hands in nova.conf's fallbacks and
the key it read from libvirt.
"""

import base64
import collections
from collections import abc
import errno
import grp
import os
import re
import secrets
import stat

from nova_ext import exception

DRIVER_VOLUME_TYPE = 'rbd'
KEYRING_SUFFIX = '.keyring'

# What may reach the origin string or the keyring unescaped, or at all.
_USER = re.compile(r'^[A-Za-z0-9_.-]+\Z')
_HOST = re.compile(r'^[A-Za-z0-9_.:%-]+\Z')
_VOLUME_ID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*\Z')

Source = collections.namedtuple('Source', [
    'pool', 'image',
    'monitors',       # [(host, port or None)], host without brackets
    'user',           # cephx id without "client.", or None: no auth
    'secret_uuid',    # the libvirt secret holding its key, or None
    'secret_source',  # where secret_uuid came from, for the operator
])

FROM_CINDER = ("the secret_uuid Cinder gave, rbd_secret_uuid of the "
               "volume's back-end in cinder.conf")
FROM_NOVA = "[libvirt] rbd_secret_uuid in nova.conf"


def is_rbd(connection_info):
    """Whether ``connection_info`` is an RBD network disk (no device)."""
    if not isinstance(connection_info, abc.Mapping):
        return False
    data = connection_info.get('data')
    return (connection_info.get('driver_volume_type') == DRIVER_VOLUME_TYPE
            and isinstance(data, abc.Mapping)
            and not data.get('device_path'))


def volume_id(connection_info):
    """The Cinder volume id of this connection (names its keyring)."""
    return (connection_info['data'].get('volume_id') or
            connection_info.get('serial'))


def _invalid(name, value, reason):
    return exception.InvalidArgument(name='rbd connection_info %s' % name,
                                     value=value, reason=reason)


def source(connection_info, rbd_user=None, rbd_secret_uuid=None):
    """What the agent needs of an RBD volume, with auth as Nova has it.

    :param rbd_user: ``[libvirt] rbd_user`` of nova.conf.
    :param rbd_secret_uuid: ``[libvirt] rbd_secret_uuid`` of nova.conf.
    :raises nova_ext.exception.InvalidArgument: a name, monitor or user
        that the origin string or the keyring could not carry faithfully.
    """
    data = connection_info['data']
    name = data.get('name')
    pool, _, image = (name or '').partition('/')
    if not isinstance(name, str) or not pool or not image:
        raise _invalid('name', name, 'expected POOL/IMAGE')

    hosts = data.get('hosts') or []
    ports = data.get('ports') or []
    monitors = []
    for i, host in enumerate(hosts):
        host = str(host).strip('[]')
        if not _HOST.match(host):
            raise _invalid('hosts', hosts, 'not a host name or address')
        port = ports[i] if i < len(ports) else None
        if port is not None and port != '':
            if not str(port).isdigit() or not 0 < int(port) < 65536:
                raise _invalid('ports', ports, 'not a TCP port')
            port = str(int(port))
        else:
            port = None
        monitors.append((host, port))

    # As nova.virt.libvirt.volume.net.LibvirtNetVolumeDriver.
    # _set_auth_config_rbd: Cinder's values first; a connection without
    # Cinder's secret_uuid takes nova.conf's user and secret together;
    # auth disabled but nova.conf naming a secret takes nova.conf's too.
    user = secret_uuid = secret_from = None
    if data.get('auth_enabled'):
        if data.get('secret_uuid') is not None:
            user = data.get('auth_username')
            secret_uuid = data['secret_uuid']
            secret_from = FROM_CINDER
        else:
            user, secret_uuid = rbd_user, rbd_secret_uuid
            secret_from = FROM_NOVA
    elif rbd_secret_uuid:
        user, secret_uuid = rbd_user, rbd_secret_uuid
        secret_from = FROM_NOVA
    if secret_from and not secret_uuid:
        raise exception.RbdKeyUnavailable(
            volume_id=volume_id(connection_info), user=user or rbd_user,
            secret_uuid='(none)', source=secret_from,
            reason='is not named: Cinder gave no secret_uuid and nova.conf '
                   'sets none')
    if secret_from and (not user or not _USER.match(str(user))):
        raise _invalid('auth_username', user,
                       'not a cephx user name (letters, digits, "_", "." '
                       'and "-"; without "client.")')
    return Source(pool, image, monitors, user, secret_uuid, secret_from)


def _escape(value, special):
    """Backslash-escape ``special`` characters and backslashes."""
    return ''.join('\\' + c if c == '\\' or c in special else c
                   for c in value)


# msgr1's port.  Cinder's RBD driver reports each monitor's legacy
# address (``mon dump``'s ``addr``), which is this port; msgr1 cannot
# encrypt, and the agent asks for msgr2's secure mode by default.  Given
# without a port, librados tries the monitor's msgr2 port (3300) and its
# msgr1 port both, as a monitor listens on by default.
MSGR1_PORT = '6789'


def _mon_host(monitors):
    out = []
    for host, port in monitors:
        if ':' in host:
            host = '[%s]' % host
        if port is None or str(port) == MSGR1_PORT:
            out.append(host)
        else:
            out.append('%s:%s' % (host, port))
    return ';'.join(out)


def origin_string(src, keyring=None):
    """The agent's origin for ``src``: QEMU's ``rbd:`` filename syntax.

    Options are separated by ``:``; a ``:`` within a value is ``\\:``.
    The pool and image escape ``/`` and ``@`` as well, which QEMU would
    otherwise read as a namespace or a snapshot.

    :param keyring: the path of the volume's keyring, if it has one.
    """
    name = '%s/%s' % (_escape(src.pool, ':/@'), _escape(src.image, ':/@'))
    options = []
    if src.user:
        options.append('id=' + _escape(src.user, ':'))
    if keyring:
        options.append('keyring=' + _escape(keyring, ':'))
    if src.monitors:
        options.append('mon_host=' + _escape(_mon_host(src.monitors), ':'))
    return ':'.join(['rbd:' + name] + options)


def keyring_name(vol_id):
    """The file name of a volume's keyring in ``[fcache] rbd_keyring_dir``.

    :raises nova_ext.exception.InvalidArgument: not a plain file name.
    """
    if not isinstance(vol_id, str) or not _VOLUME_ID.match(vol_id):
        raise _invalid('volume_id', vol_id, 'not usable as a file name')
    return vol_id + KEYRING_SUFFIX


def keyring_text(user, key):
    """A Ceph keyring of one entity.

    :param key: the cephx key as libvirt keeps a ceph secret's value: its
        bytes (``virsh secret-set-value --base64`` decodes it).
    """
    return '[client.%s]\n\tkey = %s\n' % (
        user, base64.b64encode(key).decode('ascii'))


def _gid(group):
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise exception.InvalidArgument(
            name='[fcache] rbd_keyring_group', value=group,
            reason='no such group on this host') from None


def _open_dir(directory, create, gid=None):
    """An fd of ``directory``, which must not be a symlink.

    :returns: the fd, or None if it does not exist and ``create`` is
        false.
    """
    if not os.path.isabs(directory):
        raise exception.InvalidArgument(
            name='[fcache] rbd_keyring_dir', value=directory,
            reason='must be an absolute path')
    created = False
    if create:
        try:
            os.mkdir(directory, 0o700)
            created = True
        except FileExistsError:
            pass
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY |
                     os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        return None
    try:
        if created and gid is not None:
            # Whatever the umask: the group only enters it.
            os.fchown(fd, -1, gid)
            os.fchmod(fd, 0o750)
        mode = os.fstat(fd).st_mode
        if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
            raise OSError(errno.EPERM, 'writable by every user')
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_keyring(directory, name, text, group=None):
    """Write a keyring file atomically; return its path.

    The file is written under a fresh temporary name (``O_EXCL``,
    ``O_NOFOLLOW``: never through a link someone left), mode 0600 (0640
    with ``group``, given before anything is written), synced, then
    renamed over ``name``: the agent never reads half a keyring.
    """
    gid = _gid(group) if group else None
    dfd = _open_dir(directory, True, gid)
    try:
        tmp = '.%s.%s.tmp' % (name, secrets.token_hex(8))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            if gid is not None:
                os.fchown(fd, -1, gid)
            os.fchmod(fd, 0o640 if gid is not None else 0o600)
            view = memoryview(text.encode('ascii'))
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            os.close(fd)
            fd = None
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            if fd is not None:
                os.close(fd)
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return os.path.join(directory, name)


def remove_keyring(directory, name):
    """Remove a keyring file; return whether there was one."""
    dfd = _open_dir(directory, False)
    if dfd is None:
        return False
    try:
        os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        return False
    finally:
        os.close(dfd)
    return True
