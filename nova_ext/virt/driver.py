"""LibvirtDriver with host-side flash cache of Cinder volumes.

Where it hooks Nova's flow (nova/virt/libvirt/driver.py, Nova 34):

``_connect_volume``
    After os-brick has connected the volume, a cacheable one is attached
    through the local agent, and ``connection_info['data']['fcache_export']``
    records the export; ``_get_volume_config`` points the guest disk at it.
    On the destination of a live migration (inside ``pre_live_migration``)
    the volume is instead *prepared* (:func:`nova_ext.migration.prepare`):
    the destination agent attaches it gated, both agents learn the
    migration.  The result goes into ``connection_info['data']
    ['fcache_migration']``, which reaches the source through
    ``migrate_data.bdms`` (LibvirtLiveMigrateData drops unknown fields; the
    BDM connection_info is the one channel that survives the conductor).
``live_migration`` (source)
    Before the memory copy: ``start`` for each volume; ``firepan`` first
    pauses the guest, so the VM stays paused until its cache is copied.  The
    post/recover callbacks Nova hands in are wrapped: after the memory
    migration ``switchover`` and ``finish`` (the source cache is released),
    then Nova's post-migration; on failure ``abort`` (the source keeps VM
    and cache), then Nova's rollback.
``_disconnect_volume``
    Detach from the agent; on the destination of a migration that has not
    switched over (Nova's rollback reaches here even when
    ``rollback_live_migration_at_destination`` does not run), abort it.
``post_live_migration_at_destination``
    Resume a guest that ``firepan`` kept paused.
"""

import errno


from nova.compute import power_state
from nova import rpc
from nova.virt import block_device as driver_block_device
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils

from nova_ext import agent
from nova_ext import exception
from nova_ext import migration
from nova_ext import notifications
from nova_ext import opts
from nova_ext import strategies
from nova_ext.virt import disk
from nova_ext.virt import policy
from nova_ext.virt import state

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class FcacheLibvirtDriver(libvirt_driver.LibvirtDriver):

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only=read_only)
        opts.register_opts(CONF)
        # Read once, at start, like the rest of nova-compute's identity.
        self._fcache_hostname = CONF.host
        self._fcache_agent_socket = CONF[opts.GROUP_NAME].agent_socket
        self._fcache_state = state.Registry()
        self._fcache_notifier = notifications.MigrationNotifier(
            rpc.get_versioned_notifier, self._fcache_hostname)

    # -- agents -----------------------------------------------------------

    @property
    def _fcache_conf(self):
        return CONF[opts.GROUP_NAME]

    def _local_agent(self):
        return agent.AgentClient(self._fcache_agent_socket,
                                 self._fcache_conf.agent_timeout)

    def _peer_agent(self, host):
        conf = self._fcache_conf
        return agent.AgentClient(conf.peer_agent_socket.format(host=host),
                                 conf.agent_timeout)

    # -- volumes ----------------------------------------------------------

    def _connect_volume(self, context, connection_info, instance,
                        encryption=None):
        super()._connect_volume(context, connection_info, instance,
                                encryption=encryption)
        pol = policy.resolve(connection_info, self._fcache_conf)
        if pol is None:
            return
        data = connection_info['data']
        volume_id = driver_block_device.get_volume_id(connection_info)
        origin = policy.origin(connection_info)
        if not origin:
            LOG.warning("Volume %s is cacheable but its connection (%s) "
                        "gives no device path for the fcache agent to "
                        "cache; it is used uncached", volume_id,
                        connection_info.get('driver_volume_type'),
                        instance=instance)
            return
        try:
            incoming = self._fcache_state.incoming(instance.uuid)
            prepared = None
            if incoming is not None:
                prepared = self._prepare_incoming(
                    context, instance, incoming.source_host, volume_id, pol)
            if prepared is not None:
                export_uri = prepared['export_uri']
                data[policy.MIGRATION_KEY] = prepared
            else:
                LOG.debug("Attaching volume %s to the fcache agent",
                          volume_id, instance=instance)
                export_uri = self._local_agent().attach_volume(
                    volume_id, origin, cache_size=pol['cache_size'],
                    write_policy=pol['write_policy'],
                    admission=pol['admission'])['export_uri']
                data.pop(policy.MIGRATION_KEY, None)
        except Exception:
            with excutils.save_and_reraise_exception():
                LOG.exception("fcache could not attach volume %s; "
                              "disconnecting it", volume_id,
                              instance=instance)
                super()._disconnect_volume(context, connection_info,
                                           instance, encryption=encryption)
        data[policy.EXPORT_KEY] = export_uri
        LOG.info("Volume %s cached by fcache, guest disk at %s", volume_id,
                 export_uri, instance=instance)

    def _get_volume_config(self, connection_info, disk_info):
        conf = super()._get_volume_config(connection_info, disk_info)
        export_uri = ((connection_info or {}).get('data') or {}).get(
            policy.EXPORT_KEY)
        if export_uri:
            conf = disk.point_at_export(conf, export_uri)
        return conf

    def _disconnect_volume(self, context, connection_info, instance,
                           encryption=None, destroy_secrets=True,
                           force=False):
        if policy.is_cacheable(connection_info):
            self._fcache_release(context, connection_info, instance)
        super()._disconnect_volume(context, connection_info, instance,
                                   encryption=encryption,
                                   destroy_secrets=destroy_secrets,
                                   force=force)

    def _fcache_release(self, context, connection_info, instance):
        volume_id = driver_block_device.get_volume_id(connection_info)
        source_host, prepared = self._fcache_state.pop_prepared(
            instance.uuid, volume_id)
        if prepared is not None:
            # Destination of a migration that did not switch over.
            self._abort(context, instance, self._peer_agent(source_host),
                        self._local_agent(), prepared, 'rollback',
                        'rolled back at the destination')
            return
        try:
            LOG.debug("Detaching volume %s from the fcache agent", volume_id,
                      instance=instance)
            self._local_agent().detach_volume(volume_id)
        except exception.AgentError as exc:
            if exc.errno == errno.ENOENT:
                # Released by a migration, or never attached: nothing to do.
                return
            # EBUSY: a migration still owns it (doc/migration.rst).  The
            # agent keeps every block; disconnecting os-brick under it
            # would not lose data, but the operator must settle it.
            LOG.error("fcache agent kept volume %s: %s", volume_id, exc,
                      instance=instance)

    # -- live migration: destination --------------------------------------

    def pre_live_migration(self, context, instance, block_device_info,
                           network_info, disk_info, migrate_data):
        self._fcache_state.begin_incoming(instance.uuid, instance.host)
        try:
            return super().pre_live_migration(
                context, instance, block_device_info, network_info,
                disk_info, migrate_data)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._abort_incoming(context, instance, 'pre_live_migration')

    def _prepare_incoming(self, context, instance, source_host, volume_id,
                          pol):
        src = self._peer_agent(source_host)
        try:
            source_volume = src.show_volume(volume_id)
        except exception.AgentError as exc:
            if exc.errno != errno.ENOENT:
                raise
            LOG.warning("Volume %s is not cached on %s: it starts cold "
                        "here", volume_id, source_host, instance=instance)
            return None
        plugin = strategies.load(pol['strategy'])
        conf = self._fcache_conf
        prepared = migration.prepare(
            src, self._local_agent(), volume_id,
            plugin.agent_strategy(pol, source_volume),
            rate_limit_mbps=plugin.rate_limit_mbps(pol),
            link_mbps=conf.link_mbps, origin_mbps=conf.origin_mbps)
        prepared['source_host'] = source_host
        prepared['dest_host'] = self._fcache_hostname
        prepared['plugin'] = pol['strategy']
        self._fcache_state.add_prepared(instance.uuid, volume_id, prepared)
        LOG.info("Prepared cache migration %s of volume %s from %s: %s (%s)",
                 prepared['migration_id'], volume_id, source_host,
                 prepared['strategy'], prepared['reason'],
                 instance=instance)
        return prepared

    def _abort_incoming(self, context, instance, phase):
        incoming = self._fcache_state.end_incoming(instance.uuid)
        if incoming is None:
            return
        for prepared in incoming.volumes.values():
            self._abort(context, instance,
                        self._peer_agent(incoming.source_host),
                        self._local_agent(), prepared, phase,
                        'destination preparation failed')

    def post_live_migration_at_destination(self, context, instance,
                                           network_info,
                                           block_migration=False,
                                           block_device_info=None):
        incoming = self._fcache_state.end_incoming(instance.uuid)
        super().post_live_migration_at_destination(
            context, instance, network_info, block_migration=block_migration,
            block_device_info=block_device_info)
        if incoming and any(p['strategy'] == 'firepan'
                            for p in incoming.volumes.values()):
            guest = self._host.get_guest(instance)
            if guest.get_power_state(self._host) == power_state.PAUSED:
                LOG.info("Resuming the guest firepan kept paused",
                         instance=instance)
                guest.resume()

    def rollback_live_migration_at_destination(self, context, instance,
                                               network_info,
                                               block_device_info,
                                               destroy_disks=True,
                                               migrate_data=None):
        try:
            super().rollback_live_migration_at_destination(
                context, instance, network_info, block_device_info,
                destroy_disks=destroy_disks, migrate_data=migrate_data)
        finally:
            self._abort_incoming(context, instance, 'rollback')

    # -- live migration: source -------------------------------------------

    def live_migration(self, context, instance, dest, post_method,
                       recover_method, block_migration=False,
                       migrate_data=None):
        outgoing = _outgoing(migrate_data)
        if not outgoing:
            return super().live_migration(
                context, instance, dest, post_method, recover_method,
                block_migration, migrate_data)
        src, dst = self._local_agent(), self._peer_agent(dest)
        paused = self._start_outgoing(context, instance, src, dst, outgoing)
        if paused is None:
            # Nothing moved; Nova's rollback cleans up the destination.
            recover_method(context, instance, dest, migrate_data)
            return

        def post(*args, **kwargs):
            self._complete_outgoing(context, instance, src, dst, outgoing)
            return post_method(*args, **kwargs)

        def recover(*args, **kwargs):
            for prepared in outgoing:
                self._abort(context, instance, src, dst, prepared,
                            'memory_migration', 'live migration failed')
            if paused:
                self._host.get_guest(instance).resume()
            return recover_method(*args, **kwargs)

        return super().live_migration(context, instance, dest, post,
                                      recover, block_migration,
                                      migrate_data)

    def _start_outgoing(self, context, instance, src, dst, outgoing):
        """Run ``start`` for every volume; None if it failed (rolled back).

        :returns: whether the guest was paused (firepan).
        """
        pause = any(p['strategy'] == 'firepan' for p in outgoing)
        if pause:
            LOG.info("Pausing the guest for the firepan cache copy",
                     instance=instance)
            self._host.get_guest(instance).pause()
        for prepared in outgoing:
            self._fcache_notifier.start(context, _base(instance, prepared))
            try:
                migration.start(src, dst, prepared['migration_id'])
            except Exception as exc:
                # start() rolled this one back already.
                LOG.error("Cache migration %s failed to start: %s",
                          prepared['migration_id'], exc, instance=instance)
                self._fcache_notifier.error(context,
                                            _base(instance, prepared),
                                            'start', exc)
                for other in outgoing:
                    if other is not prepared:
                        self._abort(context, instance, src, dst, other,
                                    'start', 'another volume failed')
                if pause:
                    self._host.get_guest(instance).resume()
                return None
        return pause

    def _complete_outgoing(self, context, instance, src, dst, outgoing):
        conf = self._fcache_conf
        for prepared in outgoing:
            mid = prepared['migration_id']
            phase = 'switchover'
            try:
                migration.switchover(src, dst, mid)
                phase = 'finish'
                result = migration.finish(src, dst, mid,
                                          timeout_s=conf.migration_timeout)
                hit_ratio = dst.show_volume(prepared['volume_id']).get(
                    'hit_ratio')
            except Exception as exc:
                # The VM runs on the destination already: no rollback is
                # possible; the agents keep every block (doc/migration.rst,
                # Failures) and the operator is told.
                LOG.error("Cache migration %s of volume %s failed in %s "
                          "after the VM moved: %s", mid,
                          prepared['volume_id'], phase, exc,
                          instance=instance)
                self._fcache_notifier.error(context,
                                            _base(instance, prepared),
                                            phase, exc)
                continue
            LOG.info("Cache migration %s of volume %s completed: %s, "
                     "%d bytes in %.2f s, downtime %.3f s", mid,
                     prepared['volume_id'], result['strategy'],
                     result['bytes_transferred'], result['duration_s'],
                     result['downtime_s'], instance=instance)
            self._fcache_notifier.end(context, _base(instance, prepared),
                                      result, hit_ratio)

    # -- both ---------------------------------------------------------------

    def _abort(self, context, instance, src, dst, prepared, phase, reason):
        mid = prepared['migration_id']
        try:
            migration.abort(src, dst, mid)
        except exception.FcacheException as exc:
            # Already aborted by the other side (the source's rollback and
            # the destination's both get here): the agents forget a
            # migration once, and the first abort has notified.
            LOG.warning("Abort of cache migration %s: %s", mid, exc,
                        instance=instance)
            return
        LOG.info("Cache migration %s aborted (%s): the source keeps the "
                 "cache", mid, reason, instance=instance)
        self._fcache_notifier.error(
            context, _base(instance, prepared), phase,
            exception.MigrationFailed(migration_id=mid,
                                      volume_id=prepared['volume_id'],
                                      phase=phase, reason=reason))


def _outgoing(migrate_data):
    """The prepared cache migrations the destination sent back."""
    result = []
    for bdm in getattr(migrate_data, 'bdms', None) or []:
        if not bdm.obj_attr_is_set('connection_info_json'):
            continue
        info = bdm.connection_info or {}
        prepared = (info.get('data') or {}).get(policy.MIGRATION_KEY)
        if prepared:
            result.append(prepared)
    return result


def _base(instance, prepared):
    return {'instance_uuid': instance.uuid,
            'migration_id': prepared['migration_id'],
            'volume_id': prepared['volume_id'],
            'strategy': prepared['strategy'],
            'source_host': prepared.get('source_host'),
            'dest_host': prepared.get('dest_host')}
