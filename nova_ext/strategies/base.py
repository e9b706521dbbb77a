# SPDX-License-Identifier: Apache-2.0
"""The interface of a cache migration strategy plugin."""

import abc

from nova_ext import costmodel

# What the agents can run (plus 'auto', resolved by nova_ext.migration).
AGENT_STRATEGIES = costmodel.STRATEGIES + ('auto',)


class Strategy(metaclass=abc.ABCMeta):
    """Chooses what the agents do when a VM with a cached volume moves.

    Plugins are instantiated without arguments and must be thread-safe
    (nova-compute runs migrations in parallel threads); keep no per-call
    state on ``self``.
    """

    #: The entry-point name; informational.
    name = None

    @abc.abstractmethod
    def agent_strategy(self, policy, source_volume):
        """Return the agent strategy to run for one volume.

        :param policy: the volume's resolved policy
            (:func:`nova_ext.virt.policy.resolve`): ``strategy``,
            ``cache_size``, ``write_policy``, ``admission``, ``rws_n``,
            ``staging``, ``rate_limit``.
        :param source_volume: the source agent's ``volume-show`` result
            (``cached_blocks``, ``dirty_blocks``, ``block_size``, ...).
        :returns: one of :data:`AGENT_STRATEGIES`.
        :raises nova_ext.exception.FcacheException: the volume cannot be
            migrated this way; the live migration is refused before
            anything moves.
        """

    def rate_limit_mbps(self, policy):
        """MB/s cap of the transfer, or None for none (default: policy)."""
        return policy.get('rate_limit') or None
