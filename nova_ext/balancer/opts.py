# SPDX-License-Identifier: Apache-2.0
"""Options of ``fcache-balancer`` and ``fcache evacuate``.

They live in their own configuration file (``/etc/fcache/
fcache-balancer.conf``), not in nova.conf: group ``[fcache_balancer]``,
and ``[nova]`` for the Nova API credentials (keystoneauth's session, auth
and adapter options, as every OpenStack service that calls Nova has them).
``oslo-config-generator`` finds :func:`list_opts` through the
``oslo.config.opts`` entry point ``fcache.balancer``.
"""

import copy

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova_ext.balancer import decision

GROUP_NAME = 'fcache_balancer'
NOVA_GROUP_NAME = 'nova'
DEFAULT_CONFIG_FILE = '/etc/fcache/fcache-balancer.conf'

balancer_group = cfg.OptGroup(
    GROUP_NAME, title='fcache balancer options',
    help='Cache-aware balancing (fcache-balancer) and host evacuation '
         '(fcache evacuate): where the hosts\' cache demand is read, when '
         'a VM is live-migrated, and how fast.')

nova_group = cfg.OptGroup(
    NOVA_GROUP_NAME, title='Nova API',
    help='How fcache-balancer and fcache evacuate reach the Nova API '
         '(an admin: they list every server and live-migrate to a host).')

BALANCER_OPTS = [
    cfg.StrOpt('source', default='sockets',
               help='Plugin (entry point namespace fcache.balancer.sources) '
                    'that reads each host\'s cache capacity and predicted '
                    'demand.  "sockets" asks each host\'s fcache-agent over '
                    'a control socket listed in agent_sockets.'),
    cfg.DictOpt('agent_sockets', default={},
                help='For the sockets source: compute host name (as Nova '
                     'names it) to a control socket of that host\'s agent '
                     'reachable from here, e.g. "cmp1:/run/fcache-balancer/'
                     'cmp1.sock,cmp2:/run/fcache-balancer/cmp2.sock".'),
    cfg.FloatOpt('agent_timeout', default=10.0, min=0.1,
                 help='Seconds to wait for one agent to answer.'),
    cfg.FloatOpt('interval', default=0.0, min=0.0,
                 help='Seconds between two observations.  0: the agents\' '
                      'allocation window (allocation_window, or '
                      'allocation_window_min when it is auto), so that each '
                      'observation sees a new prediction.'),
    cfg.FloatOpt('threshold', default=decision.DEFAULT_THRESHOLD,
                 min=0.01, max=1.0,
                 help='Fraction of a host\'s cache capacity its predicted '
                      'demand may reach (CloudCache keeps 10 % for '
                      'surges).'),
    cfg.IntOpt('windows', default=decision.DEFAULT_WINDOWS, min=1,
               help='Consecutive observations above the threshold before '
                    'a VM of the host is moved.'),
    cfg.IntOpt('cooldown_windows', default=decision.DEFAULT_COOLDOWN_WINDOWS,
               min=0,
               help='A VM moved in one observation is not moved again in '
                    'the next cooldown_windows observations.'),
    cfg.IntOpt('max_moves_per_window', default=0, min=0,
               help='Live migrations started per observation, at most one '
                    'per over-threshold host; 0: no other limit (at 1,000 '
                    'hosts a limit of 1 leaves the cloud almost as '
                    'unbalanced as no balancer: doc/research/fleet.rst).'),
    cfg.BoolOpt('dry_run', default=False,
                help='Only log and notify the decisions; migrate nothing.'),
    cfg.StrOpt('nova_api_version', default='2.60',
               help='Compute API microversion (at least 2.25: '
                    'block_migration "auto").'),
    cfg.FloatOpt('poll_interval', default=2.0, min=0.05,
                 help='fcache evacuate: seconds between two looks at the '
                      'migrations in progress.'),
    cfg.FloatOpt('migration_timeout', default=3600.0, min=1.0,
                 help='fcache evacuate: seconds one live migration may '
                      'take before it is reported as failed (it is not '
                      'aborted).'),
    cfg.FloatOpt('link_mbps', default=None, min=0.0,
                 help='fcache evacuate: bandwidth of the migration network '
                      '(MB/s), for the cost model.  Unset: 1000.'),
    cfg.FloatOpt('origin_mbps', default=None, min=0.0,
                 help='fcache evacuate: bandwidth the shared storage gives '
                      'one VM (MB/s), for the cost model.  Unset: 200.'),
]


def _nova_opts():
    return (ks_loading.get_session_conf_options() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password') +
            ks_loading.get_adapter_conf_options(include_deprecated=False))


def register_opts(conf):
    """Register both groups on ``conf`` (a ``ConfigOpts``).

    Fresh group objects each time: ``register_group`` copies a group
    shallowly, so sharing one would share its options' overrides between
    every ``ConfigOpts`` it was registered on.
    """
    conf.register_group(copy.deepcopy(balancer_group))
    conf.register_opts(copy.deepcopy(BALANCER_OPTS), group=GROUP_NAME)
    conf.register_group(copy.deepcopy(nova_group))
    ks_loading.register_session_conf_options(conf, NOVA_GROUP_NAME)
    ks_loading.register_auth_conf_options(conf, NOVA_GROUP_NAME)
    ks_loading.register_adapter_conf_options(conf, NOVA_GROUP_NAME,
                                             include_deprecated=False)


def list_opts():
    """Return ``[(group, options)]`` for oslo-config-generator."""
    return [(balancer_group, copy.deepcopy(BALANCER_OPTS)),
            (nova_group, _nova_opts())]
