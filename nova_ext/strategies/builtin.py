# SPDX-License-Identifier: Apache-2.0
"""The built-in strategies: each runs the agent strategy of its name."""

from nova_ext.strategies import base


class _Fixed(base.Strategy):
    def agent_strategy(self, policy, source_volume):
        return self.name


class NoneStrategy(_Fixed):
    """Move nothing; the destination warms up by itself."""
    name = 'none'


class CacheMior(_Fixed):
    """Send the hot list; the destination preloads from shared storage."""
    name = 'cachemior'


class Firepan(_Fixed):
    """Copy the whole cache while the VM is paused."""
    name = 'firepan'


class FirepanIF(_Fixed):
    """Copy while the VM runs against origin; invalidation filter."""
    name = 'firepan_if'


class CloudCache(_Fixed):
    """Dirty blocks on demand, reuse working set in the background."""
    name = 'cloudcache'


class Hybrid(_Fixed):
    """Hottest-first background copy plus on-demand fetch."""
    name = 'hybrid'


class Auto(_Fixed):
    """Let the cost model (nova_ext.costmodel) choose per migration."""
    name = 'auto'
