# SPDX-License-Identifier: Apache-2.0
"""What every fcache test checks before it runs."""

from tempest import config

CONF = config.CONF


def skip_unless_deployed(cls):
    """Raise the class's skip exception unless fcache is in this cloud."""
    if not CONF.service_available.fcache:
        raise cls.skipException('fcache is not deployed '
                                '([service_available] fcache)')


def skip_unless_strategy(test, strategy):
    """Skip ``test`` unless ``[fcache_feature_enabled] <strategy>``."""
    if not getattr(CONF.fcache_feature_enabled, strategy):
        raise test.skipException('strategy %s is not enabled '
                                 '([fcache_feature_enabled] %s)'
                                 % (strategy, strategy))
