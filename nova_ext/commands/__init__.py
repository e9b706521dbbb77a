# SPDX-License-Identifier: Apache-2.0
"""Subcommands of the ``fcache`` command line tool.

Each module of this package adds one group of subcommands.  A module
exposes ``register(subparsers, parents)``, which adds its parsers with
``parents=parents`` (the options every command accepts) and sets two
defaults on each:

``run(client, args)``
    Does the work through ``client`` (an :class:`nova_ext.agent.AgentClient`
    for ``--socket``) and returns the result object, a dict: ``--json``
    prints exactly this.
``render(result, args)``
    Returns the human form of ``result`` as text.

Errors are raised as :class:`nova_ext.exception.FcacheException`; the
command line turns them into one line on stderr and an exit status.  To
add a group (``migrate``), write its module and list it in
:data:`COMMAND_MODULES`.
"""

from nova_ext.commands import agent_status
from nova_ext.commands import allocation
from nova_ext.commands import capabilities
from nova_ext.commands import evacuate
from nova_ext.commands import metrics
from nova_ext.commands import migrate
from nova_ext.commands import storage_move
from nova_ext.commands import volume
from nova_ext.commands import volume_set

COMMAND_MODULES = (
    agent_status,
    allocation,
    capabilities,
    volume,
    volume_set,
    storage_move,
    migrate,
    evacuate,
    metrics,
)
