# SPDX-License-Identifier: Apache-2.0
"""The agent's export URIs, without Nova's libvirt config classes.

ucache exports each volume over NBD on a unix socket
(``nbd+unix:///NAME?socket=PATH``), dmcache as a device path.
"""

from urllib import parse

from nova_ext import exception


def parse_export(uri):
    """Split an agent export URI.

    :returns: ``('nbd', name, socket)`` or ``('block', None, device)``.
    """
    if uri.startswith('/'):
        return 'block', None, uri
    parts = parse.urlsplit(uri)
    if parts.scheme == 'nbd+unix':
        sockets = parse.parse_qs(parts.query).get('socket')
        if sockets and sockets[0].startswith('/'):
            return 'nbd', parts.path.lstrip('/'), sockets[0]
    raise exception.InvalidArgument(
        name='export_uri', value=uri,
        reason='expected nbd+unix:///NAME?socket=/PATH (ucache) or a device '
               'path (dmcache) from the fcache agent')


def nbd_sockets(volumes):
    """The set of NBD export sockets of the agent's ``volume-list``."""
    out = set()
    for vol in volumes:
        if vol.get('export_uri'):
            kind, _, path = parse_export(vol['export_uri'])
            if kind == 'nbd':
                out.add(path)
    return out
