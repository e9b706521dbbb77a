# SPDX-License-Identifier: Apache-2.0
"""A volume's cache policy as nova-compute sees it.

Cinder puts ``cacheable`` (its own flag) and, with cinder_ext, the
``fcache:`` policy (``cinder_ext.policy``) into ``connection_info['data']``.
A volume is cached when ``cacheable`` is true; every key its type does not
set comes from ``[fcache] default_*``.

What the driver is handed as connection_info is not always a dict: Nova's
driver interface passes through whatever its caller holds (its own unit
tests hand the driver sentinels and mocks).  Only a mapping whose
``data`` is a mapping can say ``cacheable``; anything else is a volume
fcache does not serve, and the driver leaves it to LibvirtDriver.
"""

from collections import abc

from nova_ext import exception
from nova_ext import units

POLICY_KEY = 'fcache'            # set by Cinder (cinder_ext.policy)
EXPORT_KEY = 'fcache_export'     # set here: where the guest disk points
MIGRATION_KEY = 'fcache_migration'  # set on the destination: prepare()
SOURCE_KEY = 'fcache_source'     # set on the source: what it will send
# Set on the destination in its live-migration check: it can take caches.
DESTINATION_KEY = 'fcache_destination'
RESULT_KEY = 'fcache_result'     # set on the source: its figures, after
# Set by swap_volume after a storage move: the id the agent knows the
# volume by (it keeps the one it attached with) and the move's figures.
AGENT_VOLUME_KEY = 'fcache_volume'
STORAGE_MOVE_KEY = 'fcache_storage_move'


def _mapping(value):
    return value if isinstance(value, abc.Mapping) else {}


def connection_data(connection_info):
    """``connection_info['data']``, or {} if there is no such mapping."""
    return _mapping(_mapping(connection_info).get('data'))


def bdm_connection_info(bdm):
    """The connection_info of a driver BDM (a dict), or {} if none."""
    return _mapping(_mapping(bdm).get('connection_info'))


def is_cacheable(connection_info):
    return connection_data(connection_info).get('cacheable') is True


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
    data = connection_data(connection_info)
    return (data.get(AGENT_VOLUME_KEY) or data.get('volume_id') or
            _mapping(connection_info).get('serial'))


def origin(connection_info):
    """What the agent caches: the path os-brick connected, if any."""
    return connection_data(connection_info).get('device_path')
