# SPDX-License-Identifier: Apache-2.0
"""Cache migration strategies as stevedore plugins.

Namespace ``fcache.strategies``.  A volume type's ``fcache:strategy`` (or
``[fcache] default_strategy``) names a plugin; the plugin decides which
agent strategy runs (:meth:`Strategy.agent_strategy`).  The agents move the
data; a plugin is policy: an operator's own plugin can, say, pick
``firepan`` for small caches and ``hybrid`` for large ones::

    [entry_points]
    fcache.strategies =
        small_firepan = mypkg.strategies:SmallFirepan
"""

from stevedore import driver as stevedore_driver
from stevedore import exception as stevedore_exception

from nova_ext import exception
from nova_ext.strategies import base

NAMESPACE = 'fcache.strategies'

Strategy = base.Strategy


def load(name):
    """Return an instance of the strategy plugin ``name``.

    :raises nova_ext.exception.InvalidArgument: no plugin of that name is
        installed, or it does not implement :class:`Strategy`.
    """
    try:
        mgr = stevedore_driver.DriverManager(NAMESPACE, name,
                                             invoke_on_load=True)
    except stevedore_exception.NoMatches:
        raise exception.InvalidArgument(
            name='strategy', value=name,
            reason='no %s plugin of that name is installed (installed: %s)'
            % (NAMESPACE, ', '.join(names()) or 'none'))
    plugin = mgr.driver
    if not isinstance(plugin, base.Strategy):
        raise exception.InvalidArgument(
            name='strategy', value=name,
            reason='plugin %r does not derive from %s.Strategy'
            % (plugin, base.__name__))
    return plugin


def names():
    """Names of the installed strategy plugins, sorted."""
    from importlib import metadata
    return sorted({ep.name for ep in metadata.entry_points(group=NAMESPACE)})
