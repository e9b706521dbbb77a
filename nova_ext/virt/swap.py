# SPDX-License-Identifier: Apache-2.0
"""Cinder moving an in-use cached volume: ``swap_volume`` through the agent.

When Cinder migrates or retypes a volume that a VM uses, it creates the
new volume and asks Nova to swap (``os-volume_attachments`` PUT, the
compute manager's ``swap_volume``); Nova's libvirt driver connects the new
volume and has QEMU block-copy the guest disk onto it.  For a volume the
fcache agent serves, the guest disk is the agent's NBD export, and the
agent copies instead (``volume-move``): origin A is the old volume, origin
B the device os-brick connected for the new one (or, for RBD, its image
and a keyring of its own: :mod:`nova_ext.virt.rbd`).  The guest keeps the same
export and its disk XML does not change.

The scheme is the new volume type's ``fcache:storage_migration`` (else the
old type's, else ``[fcache] default_storage_migration``), one of those
the local agent's engine runs (its capabilities' ``move_schemes``);
``auto`` takes the lowest expected migration cost
(:mod:`nova_ext.movecost`) among them between the old type's
``fcache:medium`` and the new type's, for the new type's
``fcache:wear_weight``.

A move that fails, or takes longer than ``[fcache] storage_move_timeout``
(it is then aborted), leaves the old volume serving: the new one is
disconnected and the error raised, so that Nova and Cinder roll the swap
back.  After a move, the new connection_info records the export and the
agent's volume id (the agent keeps the id it attached the volume with).

A swap that grows the volume (``resize_to``), or to a volume that is not
cacheable, is left to libvirt's block copy from the export.
"""

from oslo_log import log as logging
from oslo_utils import excutils

from nova_ext import exception
from nova_ext.virt import policy
from nova_ext import volume_move

LOG = logging.getLogger(__name__)


class SwapMixin(object):
    """``swap_volume`` of the fcache driver.

    Needs ``_local_agent()``, ``_fcache_conf``, ``_fcache_hostname``,
    ``_fcache_origin`` /
    ``_fcache_forget_origin``, ``_fcache_volume_notifier`` and the
    os-brick-only ``_fcache_brick_connect`` / ``_fcache_brick_disconnect``
    of the driver.
    """

    def swap_volume(self, context, old_connection_info,
                    new_connection_info, instance, mountpoint, resize_to):
        export = policy.connection_data(old_connection_info).get(
            policy.EXPORT_KEY)
        if (not export or not policy.is_cacheable(new_connection_info) or
                resize_to):
            if export:
                LOG.info("Volume swap from %s by libvirt's block copy "
                         "from the fcache export (%s)",
                         policy.agent_volume_id(old_connection_info),
                         'the volume grows to %s GiB' % resize_to
                         if resize_to else 'the new volume is not cached',
                         instance=instance)
            return super().swap_volume(context, old_connection_info,
                                       new_connection_info, instance,
                                       mountpoint, resize_to)
        volume_id = policy.agent_volume_id(old_connection_info)
        conf = self._fcache_conf
        old_pol = policy.resolve(old_connection_info, conf)
        new_pol = policy.resolve(new_connection_info, conf)

        base = {'instance_uuid': instance.uuid, 'volume_id': volume_id}
        new_volume_id = policy.agent_volume_id(new_connection_info)
        scheme = None
        self._fcache_brick_connect(context, new_connection_info, instance)
        try:
            to = self._fcache_origin(new_connection_info)
            if not to:
                raise exception.StorageMoveFailed(
                    volume_id=volume_id, to='(none)', state='refused',
                    reason='the new volume\'s connection (%s) gives no '
                    'device path or RBD image for the fcache agent to '
                    'move to' %
                    new_connection_info.get('driver_volume_type'))
            wanted = (new_pol['storage_migration'] or
                      old_pol['storage_migration'])
            # The schemes the local agent's engine runs, from its
            # capabilities; an agent too old to list them gets all of
            # them and refuses one it cannot run.
            scheme, auto = volume_move.resolve_scheme(
                wanted,
                old_pol['medium'], new_pol['medium'], new_pol['wear_weight'],
                volume_move.assumed_workload(
                    conf.storage_move_write_mbps, ssd_mbps=conf.ssd_mbps,
                    hdd_mbps=conf.hdd_mbps,
                    depth=conf.storage_move_in_flight),
                volume_move.agent_schemes(self._local_agent()),
                'the fcache agent on %s' % self._fcache_hostname)
            self._fcache_volume_notifier.move_start(
                context, base, scheme, new_volume_id)
            status = self._fcache_move(volume_id, to, scheme, instance)
        except Exception as exc:
            self._fcache_volume_notifier.move_error(
                context, base, new_volume_id, scheme, exc)
            with excutils.save_and_reraise_exception():
                LOG.error("fcache could not move volume %s to the new "
                          "volume; the old one keeps serving the guest",
                          volume_id, instance=instance)
                self._fcache_forget_origin(new_connection_info, instance)
                self._fcache_brick_disconnect(context, new_connection_info,
                                              instance)

        data = new_connection_info['data']
        data[policy.EXPORT_KEY] = export
        data[policy.AGENT_VOLUME_KEY] = volume_id
        data[policy.STORAGE_MOVE_KEY] = dict(
            (key, status.get(key)) for key in (
                'scheme', 'from', 'to', 'bytes_total', 'rounds',
                'elapsed_s', 'downtime_ms'))
        if auto is not None:
            data[policy.STORAGE_MOVE_KEY]['auto'] = True
        # The agent no longer reads the old volume: os-brick lets it go,
        # and an RBD volume's keyring goes.
        self._fcache_brick_disconnect(context, old_connection_info,
                                      instance)
        self._fcache_forget_origin(old_connection_info, instance)
        self._fcache_volume_notifier.move_end(context, base, new_volume_id,
                                              status)
        LOG.info("Volume %(volume)s moved by the fcache agent to %(to)s "
                 "with %(scheme)s in %(elapsed)s s; the guest disk is "
                 "still %(export)s",
                 {'volume': volume_id, 'to': to, 'scheme': scheme,
                  'elapsed': status.get('elapsed_s'), 'export': export},
                 instance=instance)

    def _fcache_move(self, volume_id, to, scheme, instance):
        """Run the move to its end; abort it on any failure; raise."""
        conf = self._fcache_conf
        client = self._local_agent()
        LOG.debug("Moving volume %(volume)s to %(to)s with %(scheme)s",
                  {'volume': volume_id, 'to': to, 'scheme': scheme},
                  instance=instance)
        client.move_volume(volume_id, to, scheme=scheme,
                           rate_limit_mbps=conf.storage_move_rate_limit or
                           None)
        try:
            return volume_move.wait(client, volume_id, to,
                                    conf.storage_move_timeout,
                                    poll_s=conf.storage_move_poll_interval,
                                    abort_on_timeout=True)
        except (exception.StorageMoveFailed, exception.StorageMoveTimeout):
            raise
        except Exception:
            with excutils.save_and_reraise_exception():
                # Lost track of it (agent unreachable, bad answer): stop
                # it if the agent still listens, so that the old volume
                # stays the one that serves.
                try:
                    client.abort_move(volume_id)
                except exception.FcacheException as exc:
                    LOG.warning("Abort of the storage move of volume %s: "
                                "%s", volume_id, exc, instance=instance)
