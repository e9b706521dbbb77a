# SPDX-License-Identifier: Apache-2.0
"""What the two hosts of a live migration tell each other, and how.

Each nova-compute drives only its own fcache agent; what one side of a
cache migration needs from the other travels in the volume's block device
mapping (BDM) ``connection_info['data']``, the one per-volume record that
both hosts read and that survives Nova's conductor (unknown fields of
``LibvirtLiveMigrateData`` are dropped):

``fcache_destination`` (:data:`policy.DESTINATION_KEY`), destination to source
    Set by the destination in ``check_can_live_migrate_destination`` when
    its agent answers (:func:`nova_ext.virt.capability.describe`): its host
    name, agent engine and cache figures.  It rides alone in the
    ``bdms`` of the destination's check data (a plain LibvirtDriver sets
    none there), and the source takes it out before it answers: its
    absence means a host that cannot take a cache, where the source
    refuses a ``write_back`` volume.
``fcache_source`` (:data:`policy.SOURCE_KEY`), source to destination
    Set by the source in ``check_can_live_migrate_source``: whether the
    volume is cached there, the agent strategy it resolved from its own
    cache figures, the cache geometry and admission (``admission``,
    ``rws_n``, ``staging``) the destination must attach with, and for a
    cached volume the migration id and the ``fingerprint`` of the key pair
    the source's agent made for it (``migration-key``), which the
    destination's agent pins.  It
    rides in the ``migrate_data.bdms`` the source returns (one
    ``LibvirtLiveMigrateBDMInfo`` per cached volume, whose connection_info
    holds only this); Nova hands that migrate_data to the destination's
    ``pre_live_migration``, which reads it before Nova's libvirt driver
    replaces ``bdms`` with the destination's own.
``fcache_migration`` (:data:`policy.MIGRATION_KEY`), destination to source
    Written by the destination when it prepares the volume: migration id,
    its agent's migration address, the one-time token and the
    ``fingerprint`` of its agent's key pair for the migration, which the
    source's agent pins.  Nova carries it to the source in
    ``migrate_data.bdms``.

Nova's RPC and database are trusted to deliver these intact, not to keep
them secret: with ``migration_tls = pinned`` (the agents' default) what
travels here are public-key fingerprints and a token that authenticates
nothing on its own; the private keys never leave the agents, so whoever
reads ``migrate_data`` or the BDM cannot complete a handshake as either
agent.
``fcache_result`` (:data:`policy.RESULT_KEY`), source to destination
    Written by the source once its agent released the volume: the source's
    figures (bytes sent, downtime), read by the destination in
    ``post_live_migration_at_destination`` for ``fcache.migration.end``;
    the destination then drops it and the spent token.
"""

from nova import objects
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_ext.virt import policy

LOG = logging.getLogger(__name__)

# The source's figures the destination reports in fcache.migration.end.
RESULT_FIGURES = ('blocks_done', 'bytes_done', 'downtime_s', 'duration_s')


def _data(connection_info_json):
    info = jsonutils.loads(connection_info_json or 'null') or {}
    return info, info.setdefault('data', {})


def offer_destination(migrate_data, destination):
    """Put this destination's description into its check data."""
    if destination is None:
        return
    migrate_data.bdms = [objects.LibvirtLiveMigrateBDMInfo(
        serial=policy.DESTINATION_KEY,
        connection_info_json=jsonutils.dumps(
            {'data': {policy.DESTINATION_KEY: destination}}))]


def take_destination(migrate_data):
    """Remove and return the destination's description, or None."""
    found = None
    for bdmi in _bdms(migrate_data):
        if not bdmi.obj_attr_is_set('connection_info_json'):
            continue
        data = policy.connection_data(bdmi.connection_info)
        if data.get(policy.DESTINATION_KEY):
            found = data[policy.DESTINATION_KEY]
    if found is not None:
        # Nothing else of the check goes there: leave the field as a plain
        # destination's check would.
        del migrate_data.bdms
    return found


def offer_sources(migrate_data, sources):
    """Put ``{volume_id: fcache_source}`` into the source's migrate_data."""
    if not sources:
        return
    migrate_data.bdms = [
        objects.LibvirtLiveMigrateBDMInfo(
            serial=volume_id,
            connection_info_json=jsonutils.dumps(
                {'data': {policy.SOURCE_KEY: source}}))
        for volume_id, source in sources.items()]


def read_sources(migrate_data):
    """``{volume_id: fcache_source}`` from the source's migrate_data."""
    result = {}
    for bdmi in _bdms(migrate_data):
        if not bdmi.obj_attr_is_set('connection_info_json'):
            continue
        data = (bdmi.connection_info or {}).get('data') or {}
        if data.get(policy.SOURCE_KEY):
            result[bdmi.serial] = data[policy.SOURCE_KEY]
    return result


def record_result(context, instance_uuid, volume_id, status):
    """Store the source's figures for the destination; never raises."""
    try:
        bdm = objects.BlockDeviceMapping.get_by_volume_and_instance(
            context, volume_id, instance_uuid)
        info, data = _data(bdm.connection_info)
        data[policy.RESULT_KEY] = {k: status.get(k) for k in RESULT_FIGURES}
        bdm.connection_info = jsonutils.dumps(info)
        bdm.save()
    except Exception:
        LOG.exception("Could not record the source's figures of volume %s; "
                      "fcache.migration.end will report them as 0",
                      volume_id, instance_uuid=instance_uuid)


def take_results(driver_bdms):
    """Pop the source's figures and the spent tokens from ``driver_bdms``.

    :param driver_bdms: the ``block_device_mapping`` of Nova's
        ``block_device_info`` (DriverVolumeBlockDevice objects, saved here).
    :returns: ``{volume_id: figures}``.
    """
    results = {}
    for bdm in driver_bdms:
        data = policy.connection_data(policy.bdm_connection_info(bdm))
        prepared = data.get(policy.MIGRATION_KEY)
        if not prepared:
            continue
        results[prepared['volume_id']] = data.pop(policy.RESULT_KEY, None)
        prepared.pop('token', None)
        try:
            bdm.save()
        except Exception:
            LOG.exception("Could not drop the spent migration token of "
                          "volume %s from its connection_info",
                          prepared['volume_id'])
    return results


def _bdms(migrate_data):
    """``migrate_data.bdms``, or [] where Nova's migrate data has none.

    An unset field of a versioned object raises on access (the base class
    cannot load it): a destination that prepared no volume, and Nova's
    migrate data outside a libvirt-to-libvirt migration, leave it unset.
    """
    if migrate_data is None or not migrate_data.obj_attr_is_set('bdms'):
        return []
    return migrate_data.bdms


def cacheable(migrate_data):
    """The destination's entries of the volumes Cinder says are cacheable.

    From the destination's ``pre_live_migration`` answer, which lists every
    volume with the connection_info it connected: Cinder's (a plain
    LibvirtDriver there), with a prepared cache migration or an export of
    its own agent (fcache's driver).
    """
    return [bdmi for bdmi in _bdms(migrate_data)
            if bdmi.obj_attr_is_set('connection_info_json') and
            policy.is_cacheable(bdmi.connection_info)]


def unprepared(migrate_data):
    """Volumes the destination connected as cacheable but did not prepare.

    A plain LibvirtDriver there never prepares one.
    :returns: their volume ids (``serial``).
    """
    return [bdmi.serial for bdmi in cacheable(migrate_data)
            if not policy.connection_data(bdmi.connection_info).get(
                policy.MIGRATION_KEY)]


def outgoing(migrate_data):
    """The cache migrations the destination prepared, from its answer."""
    result = []
    for bdm in _bdms(migrate_data):
        if not bdm.obj_attr_is_set('connection_info_json'):
            continue
        info = bdm.connection_info or {}
        prepared = (info.get('data') or {}).get(policy.MIGRATION_KEY)
        if prepared:
            result.append(prepared)
    return result


def notification_base(instance, prepared):
    """What every fcache.migration.* payload says about the migration."""
    return {'instance_uuid': instance.uuid,
            'migration_id': prepared['migration_id'],
            'volume_id': prepared['volume_id'],
            'strategy': prepared['strategy'],
            'source_host': prepared.get('source_host'),
            'dest_host': prepared.get('dest_host')}
