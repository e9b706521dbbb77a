# SPDX-License-Identifier: Apache-2.0
"""The migration address a destination hands to the source host.

The source agent connects to the destination agent's migration listener.
The agent reports the address it listens on (``migration_listen``), which
may be a wildcard; the source needs one it can connect to.
"""

import ipaddress

WILDCARDS = ('0.0.0.0', '::', '[::]', '')


def advertised(listen, configured=None, my_ip=None):
    """Return ``host:port`` for the source to connect to.

    :param listen: the agent's ``migration_listen`` as it reports it.
    :param configured: ``[fcache] migration_address``; wins when set.
    :param my_ip: Nova's ``[DEFAULT] my_ip``, used for a wildcard host.
    """
    if configured:
        return configured
    host, _, port = listen.rpartition(':')
    if host not in WILDCARDS or not my_ip:
        return listen
    ip = str(my_ip)
    if ipaddress.ip_address(ip).version == 6:
        ip = '[%s]' % ip
    return '%s:%s' % (ip, port)
