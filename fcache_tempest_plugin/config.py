# SPDX-License-Identifier: Apache-2.0
"""tempest.conf options of the fcache plugin.

``[service_available] fcache`` turns the tests on; ``[fcache]`` says which
volume type policy the scenarios use and where the agents can be asked;
``[fcache_feature_enabled]`` turns the live migration scenario of each
strategy on or off.
"""

from oslo_config import cfg

from nova_ext import vocabulary

# The strategies nova_ext ships (setup.cfg, fcache.strategies).
STRATEGIES = vocabulary.STRATEGIES + ('auto',)

service_option = cfg.BoolOpt(
    'fcache',
    default=False,
    help='Whether the fcache host cache (fcache-agent on every compute '
         'host, nova-compute with compute_driver = '
         'fcache.FcacheLibvirtDriver, cinder-api with the '
         'cinder_ext.api.Fcache_volume_policy extension) is deployed.')

fcache_group = cfg.OptGroup(
    name='fcache',
    title='fcache host cache options')

FcacheGroup = [
    cfg.StrOpt('cache_size',
               default='64M',
               help='fcache:cache_size of the volume types the scenarios '
                    'create.'),
    cfg.StrOpt('write_policy',
               default='write_back',
               choices=['read_only', 'write_through', 'write_back'],
               help='fcache:write_policy of the volume types the scenarios '
                    'create.'),
    cfg.IntOpt('data_size_mb',
               default=16,
               min=1,
               max=1024,
               help='MiB of random data the scenario writes through the '
                    'guest onto the cached volume before the live migration '
                    'and reads back after it. At most the volume\'s size '
                    '(1 GiB).'),
    cfg.BoolOpt('guest_console',
                default=False,
                help='The image ([compute] image_ref) is fcache-guest, as '
                     'tools/cloud.sh builds it: it writes data onto the '
                     'volume it boots from and reports them, and every '
                     'read-back, on its serial console. The console '
                     'scenarios then run, with no network and no SSH.'),
    cfg.DictOpt('agent_sockets',
                default={},
                help='Control socket of the fcache-agent of each compute '
                     'host, as reachable from the Tempest host, as '
                     'host:path pairs (Nova host names). The scenario '
                     'checks the volume\'s cache through the agents it can '
                     'reach here and skips those checks for the others. '
                     'Single-node DevStack: the local agent\'s socket.'),
]

feature_group = cfg.OptGroup(
    name='fcache_feature_enabled',
    title='fcache strategies to test')

FeatureGroup = [
    cfg.BoolOpt(strategy,
                default=True,
                help='Run the live migration scenario with fcache:strategy '
                     '= %s.' % strategy)
    for strategy in STRATEGIES
]


def list_opts():
    """The options for oslo-config-generator and the docs.

    Entry point ``oslo.config.opts``: ``fcache.tempest``.
    """
    return [
        ('service_available', [service_option]),
        (fcache_group, FcacheGroup),
        (feature_group, FeatureGroup),
    ]
