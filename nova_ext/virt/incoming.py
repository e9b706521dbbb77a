# SPDX-License-Identifier: Apache-2.0
"""The destination side of a live migration with cached volumes.

Runs in the destination's nova-compute and talks only to its own agent:

``check_can_live_migrate_destination``
    Tells the source that this host takes caches, with its agent's engine
    and figures, if the agent answers
    (:func:`nova_ext.virt.capability.describe`).
``pre_live_migration``
    Reads what the source said of each volume (``fcache_source`` in
    ``migrate_data.bdms``, see :mod:`nova_ext.virt.channel`); Nova then
    connects each volume, and ``_connect_volume`` (``FcacheLibvirtDriver``)
    calls :meth:`IncomingMixin._fcache_prepare_incoming`: the local agent
    attaches the volume gated, makes the one-time token and its own key
    pair for the migration and pins the source's fingerprint (from
    ``fcache_source``); the result, with this agent's fingerprint, goes
    back to the source in ``migrate_data.bdms``.
``post_live_migration_at_destination``
    Resumes a guest kept paused (``firepan``, or a volume on dmcache here:
    see :func:`nova_ext.virt.outgoing.hold_guest_at_destination`), emits
    ``fcache.migration.end`` with both hosts' figures and drops the spent
    token from the BDM.
rollback (``rollback_live_migration_at_destination``, or Nova's volume
disconnect, which may come instead)
    Aborts the local side: the destination forgets the volume.
"""

from nova.compute import power_state
from oslo_log import log as logging
from oslo_utils import excutils

from nova_ext import exception
from nova_ext import migration
from nova_ext.virt import address
from nova_ext.virt import capability
from nova_ext.virt import channel
from nova_ext.virt import outgoing

LOG = logging.getLogger(__name__)


class IncomingMixin(object):
    """Destination hooks; mixed into ``FcacheLibvirtDriver``."""

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info,
                                           dst_compute_info,
                                           block_migration=False,
                                           disk_over_commit=False):
        data = super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            block_migration=block_migration,
            disk_over_commit=disk_over_commit)
        channel.offer_destination(data, capability.describe(
            self._local_agent(), self._fcache_hostname))
        return data

    def pre_live_migration(self, context, instance, block_device_info,
                           network_info, disk_info, migrate_data):
        # instance.host is still the source here.  Read before Nova's
        # libvirt driver replaces migrate_data.bdms with its own.
        sources = channel.read_sources(migrate_data)
        self._fcache_state.begin_incoming(instance.uuid, instance.host,
                                          sources)
        try:
            return super().pre_live_migration(
                context, instance, block_device_info, network_info,
                disk_info, migrate_data)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._fcache_abort_incoming(context, instance,
                                            'pre_live_migration')

    def _fcache_source_is_plain(self, instance, incoming, volume_id):
        """Whether the VM arrives from a host without fcache's driver.

        Such a source describes no volume at all (fcache's describes every
        cacheable one, cached or not), caches nothing, and writes the
        guest's disk here as os-brick's device, which the agent must then
        not hold: the volume is used uncached here until its next attach
        (a hard reboot, a start), which caches it.  The rollout of fcache
        across a fleet.
        """
        if incoming.sources:
            return False
        LOG.warning("Volume %s arrives from %s, which does not run fcache's "
                    "driver: used uncached here until it is attached again "
                    "(a hard reboot caches it)", volume_id,
                    incoming.source_host, instance=instance)
        return True

    def _fcache_prepare_incoming(self, context, instance, incoming,
                                 volume_id, origin):
        """Prepare one volume; None when it starts cold here."""
        source = incoming.sources.get(volume_id)
        if source is None:
            # Starting cold could read from the origin blocks the source
            # still holds dirty: refuse, before anything moves.
            raise exception.MigrationFailed(
                migration_id='-', volume_id=volume_id, phase='prepare',
                reason='%s did not describe the cache of this volume in '
                       'its live-migration check; run the same fcache '
                       'version on both hosts' % incoming.source_host)
        if not source.get('cached'):
            LOG.warning("Volume %s is not cached on %s: it starts cold "
                        "here", volume_id, incoming.source_host,
                        instance=instance)
            return None
        # rws_n and staging are absent when the source runs an fcache
        # from before on-demand allocation: the agent here uses its own.
        # The source chose the migration id and made its key for it in
        # its check; the agent here pins that key's fingerprint.
        prepared = migration.prepare_destination(
            self._local_agent(), volume_id, source['strategy'], origin,
            source['cache_size'], source['write_policy'],
            source['admission'], migration_id=source.get('migration_id'),
            rws_n=source.get('rws_n'), staging=source.get('staging'),
            source_fingerprint=source.get('fingerprint'))
        prepared['destination'] = self._fcache_advertised(
            prepared['destination'])
        prepared.update(source_host=incoming.source_host,
                        dest_host=self._fcache_hostname,
                        plugin=source.get('plugin'),
                        reason=source.get('reason'),
                        rate_limit_mbps=source.get('rate_limit_mbps'))
        self._fcache_state.add_prepared(instance.uuid, volume_id, prepared)
        LOG.info("Prepared cache migration %s of volume %s from %s: %s (%s),"
                 " source connects to %s", prepared['migration_id'],
                 volume_id, incoming.source_host, prepared['strategy'],
                 prepared['reason'], prepared['destination'],
                 instance=instance)
        return prepared

    def _fcache_advertised(self, listen):
        """The migration address the source host connects to."""
        return address.advertised(listen, self._fcache_migration_address,
                                  self._fcache_my_ip)

    def _fcache_abort_incoming(self, context, instance, phase):
        """Abort every volume still prepared for ``instance`` here."""
        incoming = self._fcache_state.end_incoming(instance.uuid)
        if incoming is None:
            return
        for prepared in incoming.volumes.values():
            self._fcache_abort_local(context, instance, prepared, phase)

    def post_live_migration_at_destination(self, context, instance,
                                           network_info,
                                           block_migration=False,
                                           block_device_info=None):
        incoming = self._fcache_state.end_incoming(instance.uuid)
        super().post_live_migration_at_destination(
            context, instance, network_info, block_migration=block_migration,
            block_device_info=block_device_info)
        if not incoming or not incoming.volumes:
            return
        # libvirt started this QEMU from XML, without the reconnect delay
        # the source's QEMU had (nova_ext.virt.reconnect).
        self._fcache_ride_out_restarts(self._host.get_guest(instance),
                                       instance)
        volumes = list(incoming.volumes.values())
        if any(p['strategy'] == 'firepan' for p in volumes) or \
                outgoing.hold_guest_at_destination(volumes):
            guest = self._host.get_guest(instance)
            if guest.get_power_state(self._host) == power_state.PAUSED:
                LOG.info("Resuming the guest kept paused until its cache "
                         "switched over", instance=instance)
                guest.resume()
        results = channel.take_results(
            (block_device_info or {}).get('block_device_mapping') or [])
        for volume_id, prepared in incoming.volumes.items():
            self._fcache_report_end(context, instance, prepared,
                                    results.get(volume_id) or {})

    def _fcache_report_end(self, context, instance, prepared, src_figures):
        dst = self._local_agent()
        mid = prepared['migration_id']
        try:
            st = migration.status(dst, mid)
            if st['state'] != 'completed' and not src_figures:
                # The source saw the failure and reported it (.error).
                LOG.warning("Cache migration %s of volume %s ended %s here: "
                            "%s", mid, prepared['volume_id'], st['state'],
                            st.get('error', 'see the source host'),
                            instance=instance)
                return
            if st['state'] != 'completed':
                # The source released the volume, which it does only after
                # this agent said COMPLETE: the stream ending right after
                # it was the source going away, not a failure.
                LOG.info("Cache migration %s: the source released the "
                         "volume after completion; the agent here saw its "
                         "stream end (%s)", mid, st.get('error'),
                         instance=instance)
            vol = dst.show_volume(prepared['volume_id'])
        except exception.FcacheException as exc:
            LOG.error("Cannot read the result of cache migration %s: %s",
                      mid, exc, instance=instance)
            return
        result = migration.summary(src_figures, st, vol)
        LOG.info("Cache migration %s of volume %s completed: %s, "
                 "%d bytes in %.2f s, downtime %.3f s", mid,
                 prepared['volume_id'], result['strategy'],
                 result['bytes_transferred'], result['duration_s'],
                 result['downtime_s'], instance=instance)
        self._fcache_notifier.end(
            context, channel.notification_base(instance, prepared), result,
            vol.get('hit_ratio'))

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
            self._fcache_abort_incoming(context, instance, None)
