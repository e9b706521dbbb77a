# SPDX-License-Identifier: Apache-2.0
"""The source side of a live migration with cached volumes.

Runs in the source's nova-compute and talks to its own agent only, except
to settle a migration that failed after the VM moved (below):

``check_can_live_migrate_source``
    For each cached volume: the local agent's figures, the strategy plugin
    and (for ``auto``) the cost model choose the agent strategy here, where
    the cache is; the choice and the cache geometry go to the destination
    in ``migrate_data.bdms`` (``fcache_source``,
    :mod:`nova_ext.virt.channel`), with the migration id chosen here and
    the fingerprint of the key pair the local agent made for it, which the
    destination's agent pins (``migration_tls = pinned``).  An agent that
    cannot answer refuses the migration before anything moves, and so does
    a ``write_back`` volume whose destination cannot take its cache
    (:mod:`nova_ext.virt.capability`: no fcache there, or its agent down).
``live_migration``
    A ``write_back`` volume the destination did not prepare (the check
    above should have refused it) rolls the migration back before the VM
    moves.  With what the destination prepared (``migrate_data.bdms``):
    register the outgoing side with the destination's address, token and
    fingerprint (which the local agent pins), ``start``
    (``firepan``: pause the guest and copy), then Nova's memory migration
    (a volume on dmcache at the destination: with ``VIR_MIGRATE_PAUSED``,
    so the guest runs there only once its cache has switched over).
    After it: ``switchover`` and ``finish`` (the agent waits until the
    destination holds every block it needs, then releases the volume).
    If the memory migration fails: ``abort`` here; the destination aborts
    its side in Nova's rollback.
After the switchover
    Nothing can be rolled back (the VM runs on the destination).  A
    failure there is *settled* (:func:`nova_ext.migration.settle`): the
    blocks whose newest copy is only here are written back and the
    destination serves the volume alone.  Settling lists blocks on one
    agent and acts on the other, so it needs ``[fcache]
    peer_agent_socket``; without it the operator is told the command.
"""

import errno

from nova.compute import utils as compute_utils
from nova import exception as nova_exception
from nova import objects
from nova.virt import block_device as driver_block_device
from oslo_log import log as logging
from oslo_serialization import jsonutils

from nova_ext import exception
from nova_ext import migration
from nova_ext import strategies
from nova_ext.virt import capability
from nova_ext.virt import channel
from nova_ext.virt import disk
from nova_ext.virt import policy

LOG = logging.getLogger(__name__)

# Seconds to wait for both agents to see a failure before settling.
SETTLE_WAIT_S = 30
# libvirt's VIR_MIGRATE_PAUSED: leave the domain paused on the destination.
VIR_MIGRATE_PAUSED = 1 << 5


def hold_guest_at_destination(outgoing):
    """Must the guest stay paused on the destination until the switchover?

    Yes when a volume arrives on the dmcache engine there (its export is
    a device path): the kernel serves the guest, and cannot hold its
    writes until the source has switched over while letting the
    hypervisor's reads of the disk through (doc/reference/dmcache.rst).  The
    destination resumes it in ``post_live_migration_at_destination``.
    """
    return any((p.get('export_uri') or '').startswith('/') for p in outgoing)


class PausedAtDestination(object):
    """A Nova ``Guest`` whose migrate() leaves the domain paused there."""

    def __init__(self, guest):
        self._guest = guest

    def __getattr__(self, name):
        return getattr(self._guest, name)

    def migrate(self, destination, flags=0, **kwargs):
        return self._guest.migrate(destination,
                                   flags=flags | VIR_MIGRATE_PAUSED, **kwargs)


class DestinationDiskTypes(object):
    """A Nova ``Guest`` whose migrate() gives volume disks their new type.

    See :func:`nova_ext.virt.disk.set_disk_types`.
    """

    def __init__(self, guest, types):
        self._guest = guest
        self._types = types

    def __getattr__(self, name):
        return getattr(self._guest, name)

    def migrate(self, destination, destination_xml=None, **kwargs):
        if destination_xml:
            destination_xml = disk.set_disk_types(destination_xml,
                                                  self._types)
        return self._guest.migrate(destination,
                                   destination_xml=destination_xml, **kwargs)


class OutgoingMixin(object):
    """Source hooks; mixed into ``FcacheLibvirtDriver``."""

    def check_can_live_migrate_source(self, context, instance,
                                      dest_check_data,
                                      block_device_info=None):
        result = super().check_can_live_migrate_source(
            context, instance, dest_check_data,
            block_device_info=block_device_info)
        destination = channel.take_destination(result)
        room = {'free_bytes': (destination or {}).get('free_bytes')}
        sources = {}
        for bdm in (block_device_info or {}).get(
                'block_device_mapping') or []:
            info = policy.bdm_connection_info(bdm)
            pol = policy.resolve(info, self._fcache_conf)
            if pol is None:
                continue
            volume_id = driver_block_device.get_volume_id(info)
            if not info['data'].get(policy.EXPORT_KEY):
                # Used uncached here: nothing to move, nothing dirty.
                sources[volume_id] = {'cached': False}
                continue
            try:
                # After a storage move the agent still knows the volume by
                # the id it was attached with.
                source = self._fcache_describe_source(
                    policy.agent_volume_id(info), pol, destination)
            except exception.FcacheException as exc:
                raise nova_exception.MigrationPreCheckError(
                    reason='fcache cannot migrate the cache of volume %s: '
                           '%s' % (volume_id, exc))
            refused = capability.refusal(volume_id, source, destination,
                                         room)
            if refused:
                LOG.warning("Live migration refused: %s", refused,
                            instance=instance)
                raise nova_exception.MigrationPreCheckError(
                    reason='fcache: %s' % refused)
            if source['cached']:
                source.update(self._fcache_source_key(volume_id))
            if source['cached'] and destination is None:
                LOG.info("Volume %s (%s) migrates uncached: the destination "
                         "does not take fcache caches; this host releases "
                         "its cache after the migration, with nothing to "
                         "write back", volume_id, source['write_policy'],
                         instance=instance)
            sources[volume_id] = source
        # Also to a destination without fcache: an fcache host whose agent
        # did not answer the check then refuses the volume in its
        # pre_live_migration, naming its agent's error.
        channel.offer_sources(result, sources)
        return result

    def _fcache_source_key(self, volume_id):
        """This agent's key pair for the migration of one volume.

        Made here, before the destination prepares, because the
        destination must pin its fingerprint before it accepts a stream
        (``migration_tls = pinned``).  The migration id is chosen here for
        the same reason: the key is this agent's for that id alone.

        :returns: dict with ``migration_id`` and ``fingerprint`` (None when
            the agent runs another ``migration_tls`` mode).
        """
        try:
            return migration.prepare_key(self._local_agent(), volume_id)
        except exception.FcacheException as exc:
            raise nova_exception.MigrationPreCheckError(
                reason='fcache cannot make the migration key of volume %s '
                       'on this host: %s' % (volume_id, exc))

    def _fcache_describe_source(self, volume_id, pol, destination=None):
        try:
            vol = self._local_agent().show_volume(volume_id)
        except exception.AgentError as exc:
            if exc.errno != errno.ENOENT:
                raise
            return {'cached': False}
        conf = self._fcache_conf
        plugin = strategies.load(pol['strategy'])
        rate = plugin.rate_limit_mbps(pol)
        hint = (vol.get('strategy_hint') or {}).get('strategy')
        if hint:
            # An operator's tool planned this migration (fcache evacuate):
            # its choice for the volume wins over the volume type's.
            strategy, reason = migration.choose_strategy(
                vol, hint, rate_limit_mbps=rate, link_mbps=conf.link_mbps,
                origin_mbps=conf.origin_mbps)
            reason = 'planned for this migration (strategy_hint)'
        else:
            strategy, reason = migration.choose_strategy(
                capability.engine_view(vol, destination),
                plugin.agent_strategy(pol, vol), rate_limit_mbps=rate,
                link_mbps=conf.link_mbps, origin_mbps=conf.origin_mbps)
        source = {'cached': True, 'plugin': pol['strategy'],
                  'strategy': strategy, 'reason': reason,
                  'rate_limit_mbps': rate, 'cache_size': vol['cache_size'],
                  'write_policy': vol['write_policy']}
        # admission, rws_n, staging: the destination admits as here.
        source.update(migration.admission_params(vol))
        return source

    def live_migration(self, context, instance, dest, post_method,
                       recover_method, block_migration=False,
                       migrate_data=None):
        outgoing = channel.outgoing(migrate_data)
        left = self._fcache_left_behind(context, instance, migrate_data,
                                        outgoing)
        if left:
            # The check should have refused this (it runs for every
            # destination Nova tries, forced or not): nothing has moved
            # yet, so roll back rather than leave dirty blocks behind.
            exc = nova_exception.MigrationError(reason=(
                'fcache: the destination %s did not prepare the cache of '
                'write_back volume(s) %s, which hold dirty blocks only on '
                'this host; the live migration is rolled back before the '
                'VM moves.  Live-migrate to a host running fcache with its '
                'agent up' % (dest, ', '.join(left))))
            LOG.error("%s", exc, instance=instance)
            compute_utils.add_instance_fault_from_exc(context, instance, exc)
            recover_method(context, instance, dest, migrate_data)
            return
        if not outgoing:
            return super().live_migration(
                context, instance, dest, post_method, recover_method,
                block_migration, migrate_data)
        src = self._local_agent()
        paused = self._fcache_start_outgoing(context, instance, src,
                                             outgoing)
        if paused is None:
            # Nothing moved; Nova's rollback aborts the destination side.
            recover_method(context, instance, dest, migrate_data)
            return

        def post(*args, **kwargs):
            self._fcache_complete_outgoing(context, instance, src, outgoing)
            return post_method(*args, **kwargs)

        def recover(*args, **kwargs):
            for prepared in outgoing:
                self._fcache_abort_local(context, instance, prepared,
                                         'memory_migration')
            if paused:
                self._host.get_guest(instance).resume()
            return recover_method(*args, **kwargs)

        return super().live_migration(context, instance, dest, post,
                                      recover, block_migration,
                                      migrate_data)

    def _fcache_left_behind(self, context, instance, migrate_data,
                            outgoing):
        """write_back volumes cached here that the destination left out.

        The candidates are the volumes the destination connected as
        cacheable without preparing a cache migration (a plain
        LibvirtDriver there); this host's agent says which of them it
        caches with write_back.  A volume the agent cannot describe counts:
        its dirty blocks, if any, would be left behind just the same.
        """
        prepared = {p['volume_id'] for p in outgoing}
        left = []
        agent_ids = None
        for volume_id in channel.unprepared(migrate_data):
            if volume_id in prepared:
                continue
            if agent_ids is None:
                agent_ids = self._fcache_agent_ids(context, instance)
            try:
                vol = self._local_agent().show_volume(
                    agent_ids.get(volume_id, volume_id))
            except exception.AgentError as exc:
                if exc.errno == errno.ENOENT:
                    continue
                vol = {'write_policy': 'unknown (%s)' % exc}
            except exception.FcacheException as exc:
                vol = {'write_policy': 'unknown (%s)' % exc}
            if vol.get('write_policy') not in capability.NOTHING_DIRTY:
                LOG.error("Volume %s is cached here (%s) and the "
                          "destination did not prepare its cache",
                          volume_id, vol.get('write_policy'),
                          instance=instance)
                left.append(volume_id)
        return left

    def _fcache_agent_ids(self, context, instance):
        """``{volume id: the id this host's agent knows it by}``.

        They differ after a storage move (the agent keeps the id the volume
        was attached with, recorded in the BDM's connection_info); the
        destination's answer names volumes by their Cinder ids.
        """
        ids = {}
        try:
            bdms = objects.BlockDeviceMappingList.get_by_instance_uuid(
                context, instance.uuid)
        except Exception as exc:
            LOG.warning("Cannot read the volumes of the instance (%s): its "
                        "agent is asked by Cinder volume id", exc,
                        instance=instance)
            return ids
        for bdm in bdms:
            if bdm.is_volume and bdm.connection_info:
                info = jsonutils.loads(bdm.connection_info)
                ids[bdm.volume_id] = policy.agent_volume_id(info) or \
                    bdm.volume_id
        return ids

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        if hold_guest_at_destination(channel.outgoing(migrate_data)):
            LOG.info("The guest stays paused on the destination until its "
                     "cache switches over (dmcache)", instance=instance)
            guest = PausedAtDestination(guest)
        types = {bdmi.serial: self._get_volume_config(
            bdmi.connection_info, bdmi.as_disk_info()).source_type
            for bdmi in channel.cacheable(migrate_data)}
        if types:
            guest = DestinationDiskTypes(guest, types)
        return super()._live_migration_operation(
            context, instance, dest, block_migration, migrate_data, guest,
            device_names)

    def _fcache_start_outgoing(self, context, instance, src, outgoing):
        """Register and start every volume; None if one failed.

        :returns: whether the guest was paused (firepan).
        """
        pause = any(p['strategy'] == 'firepan' for p in outgoing)
        if pause:
            LOG.info("Pausing the guest for the firepan cache copy",
                     instance=instance)
            self._host.get_guest(instance).pause()
        registered = []
        for prepared in outgoing:
            self._fcache_notifier.start(
                context, channel.notification_base(instance, prepared))
            try:
                migration.prepare_source(src, prepared,
                                         prepared.get('rate_limit_mbps'))
                registered.append(prepared)
                # Rolls this one back on failure.
                migration.start_source(src, prepared['migration_id'])
            except Exception as exc:
                LOG.error("Cache migration %s failed to start: %s",
                          prepared['migration_id'], exc, instance=instance)
                self._fcache_notifier.error(
                    context, channel.notification_base(instance, prepared),
                    'start', exc)
                for other in registered:
                    if other is not prepared:
                        self._fcache_abort_local(context, instance, other,
                                                 None)
                if pause:
                    self._host.get_guest(instance).resume()
                return None
        return pause

    def _fcache_complete_outgoing(self, context, instance, src, outgoing):
        timeout = self._fcache_conf.migration_timeout
        for prepared in outgoing:
            mid, volume_id = prepared['migration_id'], prepared['volume_id']
            phase = 'switchover'
            try:
                migration.switchover(src, None, mid)
                phase = 'finish'
                st = migration.finish_source(src, mid, volume_id,
                                             timeout_s=timeout)
            except Exception as exc:
                self._fcache_settle(context, instance, src, prepared, phase,
                                    exc)
                continue
            LOG.info("Cache migration %s of volume %s: the destination "
                     "holds the cache, released here (%d bytes sent, "
                     "downtime %.3f s)", mid, volume_id, st['bytes_done'],
                     st['downtime_s'], instance=instance)
            channel.record_result(context, instance.uuid, volume_id, st)

    def _fcache_settle(self, context, instance, src, prepared, phase, exc):
        """After a failure past the switchover: settle, then report."""
        mid, volume_id = prepared['migration_id'], prepared['volume_id']
        dest = prepared.get('dest_host')
        LOG.error("Cache migration %s of volume %s failed in %s after the "
                  "VM moved to %s: %s", mid, volume_id, phase, dest, exc,
                  instance=instance)
        command = ('fcache migrate %s --from %s --to <the control socket of '
                   'the fcache agent on %s> --migration %s --phase settle'
                   % (volume_id, self._fcache_agent_socket, dest, mid))
        here = ('fcache migrate %s --from %s --migration %s --phase settle'
                % (volume_id, self._fcache_agent_socket, mid))
        dst = self._peer_agent(dest)
        if dst is None:
            # This agent settles with its peer itself, over the peer's
            # migration listener (doc/reference/migration.rst).
            try:
                result = migration.settle_through_failed(
                    src, mid, volume_id, wait_s=SETTLE_WAIT_S)
            except exception.FcacheException as settle_exc:
                old_peer = getattr(settle_exc, 'errno', None) == errno.ENOKEY
                settled = {'state': 'unsettled',
                           'reason': '[fcache] peer_agent_socket is not set '
                                     'and the agent could not settle with '
                                     'its peer: %s' % settle_exc}
                if old_peer:
                    LOG.error("Both agents hold volume %s until it is "
                              "settled; the destination's agent predates "
                              "settling through the agents: on a host that "
                              "reaches both agents run: %s", volume_id,
                              command, instance=instance)
                else:
                    LOG.error("Both agents hold volume %s until it is "
                              "settled (%s); once the agents reach each "
                              "other again run on this host: %s (or on %s "
                              "the same with --to and its agent's socket)",
                              volume_id, settle_exc, here, dest,
                              instance=instance)
            else:
                settled = dict(result, state='settled')
                LOG.warning("Volume %s settled through the agents (%s mode, "
                            "%d blocks listed): the destination serves it "
                            "alone, nothing lost", volume_id, result['mode'],
                            result['blocks'], instance=instance)
        else:
            try:
                result = migration.settle_failed(src, dst, mid, volume_id,
                                                 wait_s=SETTLE_WAIT_S)
            except exception.FcacheException as settle_exc:
                settled = {'state': 'unsettled', 'reason': str(settle_exc)}
                LOG.error("Could not settle volume %s (%s); both agents "
                          "keep its blocks; once both are reachable run: %s",
                          volume_id, settle_exc, command, instance=instance)
            else:
                settled = dict(result, state='settled')
                LOG.warning("Volume %s settled (%s mode, %d blocks listed): "
                            "the destination serves it alone, nothing lost",
                            volume_id, result['mode'], result['blocks'],
                            instance=instance)
        self._fcache_notifier.error(
            context, channel.notification_base(instance, prepared), phase,
            exc, settle=settled)
