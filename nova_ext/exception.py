# SPDX-License-Identifier: Apache-2.0
"""Exceptions raised by nova_ext.

Every failure is an :class:`FcacheException` whose message comes from the
subclass's ``msg_fmt`` template, filled from keyword arguments, so that a
caller can show ``str(exc)`` to an operator as one line.
"""

import errno as errno_mod
import logging

LOG = logging.getLogger(__name__)


class FcacheException(Exception):
    """Base class of every fcache error.

    Subclasses set ``msg_fmt``; the keyword arguments given to the
    constructor fill it and are kept in ``self.kwargs``.
    """

    msg_fmt = "An unknown fcache error occurred."

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if not message:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                # A programming error: say so once, but still raise the
                # exception the caller asked for.
                LOG.exception("Cannot format %(cls)s message from %(kwargs)s",
                              {'cls': type(self).__name__, 'kwargs': kwargs})
                message = self.msg_fmt
        # The command line prints this as a single line.
        self.message = " ".join(str(message).split())
        super(FcacheException, self).__init__(self.message)


class InvalidArgument(FcacheException):
    msg_fmt = "invalid %(name)s %(value)r: %(reason)s"


class MissingArgument(InvalidArgument):
    msg_fmt = "%(name)s is required: %(reason)s"


class AgentUnreachable(FcacheException):
    msg_fmt = ("cannot reach the fcache agent at %(path)s: %(reason)s; "
               "check that the fcache-agent service is running "
               "(systemctl status fcache-agent) and that this user may "
               "open the socket")


class AgentTimeout(FcacheException):
    msg_fmt = ("the fcache agent at %(path)s did not answer %(op)s within "
               "%(timeout)s s; the request may still complete, check with "
               "'fcache agent-status'")


class AgentError(FcacheException):
    """The agent received the request and refused or failed it.

    ``error`` is the agent's own one-line message and ``errno`` the
    (positive) errno value it reported, or None.  ``busy``: the agent
    refused the connection before reading the request (nothing ran).
    """

    msg_fmt = "%(error)s (agent errno %(errno_text)s)"

    def __init__(self, error, errno=None, busy=False):
        self.error = error
        self.errno = errno
        self.busy = busy
        if errno is None:
            errno_text = "unknown"
        else:
            name = errno_mod.errorcode.get(errno)
            errno_text = "%d %s" % (errno, name) if name else "%d" % errno
        super(AgentError, self).__init__(error=error, errno=errno,
                                         errno_text=errno_text)


class DirtyDataKept(FcacheException):
    msg_fmt = ("volume %(volume_id)s is cached write_back and the fcache "
               "agent could not detach it (%(reason)s): its cache may hold "
               "the only copy of data the guest wrote, so the volume stays "
               "attached on this host. Make its storage reachable (the "
               "agent writes every dirty block back at detach) and detach "
               "again.")


class WriteBackEvacuationRefused(FcacheException):
    # Short: Nova keeps 255 characters of an instance fault's message.
    msg_fmt = ("not evacuating: the write_back cache on %(host)s may hold "
               "the only copy of the last writes to %(volumes)s; bring "
               "%(host)s back and migrate, or set [fcache] "
               "evacuate_write_back = discard here to accept the loss")


class VolumeFormatNotCached(FcacheException):
    msg_fmt = ("volume %(volume_id)s is a %(format)s file (%(driver)s); "
               "fcache caches raw volumes only: an image file grows as the "
               "guest writes, while the cache's export has a fixed size. "
               "Use a volume type without cacheable for this back-end, or "
               "have it make raw volumes (Cinder NFS: nfs_qcow2_volumes = "
               "False)")


class RbdKeyUnavailable(FcacheException):
    msg_fmt = ("cannot cache RBD volume %(volume_id)s: the cephx key of "
               "client.%(user)s is to come from libvirt secret "
               "%(secret_uuid)s (%(source)s), which %(reason)s on this "
               "host. Define it here as Nova needs it for this volume "
               "anyway (virsh secret-define of a ceph secret with that "
               "uuid, not private; virsh secret-set-value %(secret_uuid)s "
               "--base64 <key>), or correct %(source)s")


class RbdKeyringFailed(FcacheException):
    msg_fmt = ("cannot write the keyring of RBD volume %(volume_id)s in "
               "[fcache] rbd_keyring_dir %(directory)s: %(reason)s")


class ProtocolError(FcacheException):
    msg_fmt = ("unexpected exchange with the fcache agent at %(path)s: "
               "%(reason)s")


class MigrationFailed(FcacheException):
    msg_fmt = ("cache migration %(migration_id)s of volume %(volume_id)s "
               "failed in phase %(phase)s: %(reason)s")


class StorageMoveFailed(FcacheException):
    msg_fmt = ("storage move of volume %(volume_id)s to %(to)s ended "
               "%(state)s: %(reason)s")


class StorageMoveTimeout(FcacheException):
    msg_fmt = ("storage move of volume %(volume_id)s to %(to)s still "
               "%(state)s after %(timeout)s s (%(copied)s of %(total)s "
               "bytes copied); %(action)s")
