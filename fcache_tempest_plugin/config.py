"""tempest.conf options of the fcache plugin.

``[service_available] fcache`` turns the tests on; ``[fcache]`` says which
volume type policy the scenario uses and where the agents can be asked.
"""

from oslo_config import cfg

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
    cfg.StrOpt('strategy',
               default='hybrid',
               help='fcache:strategy of the volume type the scenario '
                    'creates (none, cachemior, firepan, firepan_if, '
                    'cloudcache, hybrid, auto or an installed plugin).'),
    cfg.StrOpt('cache_size',
               default='64M',
               help='fcache:cache_size of the volume type the scenario '
                    'creates.'),
    cfg.StrOpt('write_policy',
               default='write_back',
               choices=['read_only', 'write_through', 'write_back'],
               help='fcache:write_policy of the volume type the scenario '
                    'creates.'),
    cfg.DictOpt('agent_sockets',
                default={},
                help='Control socket of the fcache-agent of each compute '
                     'host, as reachable from the Tempest host, as '
                     'host:path pairs (Nova host names). The scenario '
                     'checks the volume\'s cache through the agents it can '
                     'reach here and skips those checks for the others. '
                     'Single-node DevStack: the local agent\'s socket.'),
]
