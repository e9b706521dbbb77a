# SPDX-License-Identifier: Apache-2.0
"""Ask a compute host's fcache agent about a volume, from Tempest."""

import errno

from tempest import config

from nova_ext import agent
from nova_ext import exception

CONF = config.CONF


def show_volume(host, volume_id):
    """The agent of ``host``'s view of ``volume_id``.

    :returns: ``volume-show``'s result; ``{}`` when the agent does not hold
        the volume; None when ``[fcache] agent_sockets`` names no socket
        for ``host`` (the caller skips its check).
    """
    path = CONF.fcache.agent_sockets.get(host)
    if not path:
        return None
    try:
        return agent.AgentClient(path).show_volume(volume_id)
    except exception.AgentError as exc:
        if exc.errno == errno.ENOENT:
            return {}
        raise
