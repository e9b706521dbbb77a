"""A volume's cache policy as nova-compute sees it.

Cinder puts ``cacheable`` (its own flag) and, with cinder_ext, the
``fcache:`` policy (``cinder_ext.policy``) into ``connection_info['data']``.
A volume is cached when ``cacheable`` is true; every key its type does not
set comes from ``[fcache] default_*``.
"""

from nova_ext import exception
from nova_ext import units

POLICY_KEY = 'fcache'            # set by Cinder (cinder_ext.policy)
EXPORT_KEY = 'fcache_export'     # set here: where the guest disk points
MIGRATION_KEY = 'fcache_migration'  # set on the destination: prepare()
SOURCE_KEY = 'fcache_source'     # set on the source: what it will send
RESULT_KEY = 'fcache_result'     # set on the source: its figures, after
# Set by swap_volume after a storage move: the id the agent knows the
# volume by (it keeps the one it attached with) and the move's figures.
AGENT_VOLUME_KEY = 'fcache_volume'
STORAGE_MOVE_KEY = 'fcache_storage_move'


def is_cacheable(connection_info):
    data = (connection_info or {}).get('data') or {}
    return data.get('cacheable') is True


def resolve(connection_info, conf):
    """Return the full policy of a cacheable volume, or None.

    :param conf: the ``[fcache]`` group of nova.conf.
    :raises nova_ext.exception.InvalidArgument: a default in nova.conf is
        malformed (cache size).
    """
    if not is_cacheable(connection_info):
        return None
    given = connection_info['data'].get(POLICY_KEY) or {}
    size = given.get('cache_size')
    if size is None and conf.default_cache_size:
        try:
            size = units.parse_size(conf.default_cache_size)
        except ValueError as exc:
            raise exception.InvalidArgument(
                name='[fcache] default_cache_size',
                value=conf.default_cache_size, reason=str(exc))
    return {
        'strategy': given.get('strategy') or conf.default_strategy,
        'cache_size': size,
        'write_policy': given.get('write_policy') or
        conf.default_write_policy,
        'admission': given.get('admission') or conf.default_admission,
        'rws_n': given.get('rws_n') or conf.default_rws_n,
        'staging': given.get('staging') or conf.default_staging,
        'rate_limit': given.get('rate_limit', conf.default_rate_limit),
        'storage_migration': given.get('storage_migration') or
        conf.default_storage_migration,
        'medium': given.get('medium') or conf.default_medium,
        'wear_weight': given.get('wear_weight', conf.default_wear_weight),
    }


def agent_volume_id(connection_info):
    """The id the agent knows the volume by.

    The Cinder volume id (``data.volume_id``, else ``serial``, as Nova's
    ``get_volume_id``) unless a storage move recorded another one.
    """
    connection_info = connection_info or {}
    data = connection_info.get('data') or {}
    return (data.get(AGENT_VOLUME_KEY) or data.get('volume_id') or
            connection_info.get('serial'))


def origin(connection_info):
    """What the agent caches: the path os-brick connected, if any."""
    data = (connection_info or {}).get('data') or {}
    return data.get('device_path')
