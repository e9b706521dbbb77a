# SPDX-License-Identifier: Apache-2.0
"""LibvirtDriver with host-side flash cache of Cinder volumes.

Where it hooks Nova's flow (nova/virt/libvirt/driver.py, Nova 34):

``_connect_volume``
    After os-brick has connected the volume, a cacheable one is attached
    through the local agent, and ``connection_info['data']['fcache_export']``
    records the export; ``_get_volume_config`` points the guest disk at it.
    The agent's origin is os-brick's device, or for a Ceph RBD network
    disk its image and a keyring written here from the volume's libvirt
    secret (:mod:`nova_ext.virt.rbd`), removed in ``_disconnect_volume``.
    On the destination of a live migration (inside ``pre_live_migration``)
    the volume is instead *prepared* (:mod:`nova_ext.virt.incoming`).
``_disconnect_volume``
    Detach from the agent; on the destination of a migration that has not
    switched over (Nova's rollback reaches here even when
    ``rollback_live_migration_at_destination`` does not run), abort it.
``swap_volume``
    Cinder migrating or retyping a cached volume in use: the agent moves
    it (:mod:`nova_ext.virt.swap`).
``extend_volume``
    Cinder's online extend of a cached volume: the agent serves the new
    size, and the guest's disk (the export, not os-brick's device, which
    Nova would look for) is moved onto a new NBD node and resized
    (:mod:`nova_ext.virt.extend`).
Live migration
    :mod:`nova_ext.virt.outgoing` (source) and
    :mod:`nova_ext.virt.incoming` (destination).  Each host drives only its
    own agent; what the other side needs travels in the volume's BDM
    connection_info (:mod:`nova_ext.virt.channel`), and the cache data
    goes agent to agent over their authenticated TCP stream.
"""

import errno

from nova.compute import power_state
from nova import exception as nova_exception
from nova import objects
from nova import rpc
from nova.virt import block_device as driver_block_device
from nova.virt.libvirt import driver as libvirt_driver
from oslo_config import cfg
from oslo_log import log as logging
from oslo_serialization import jsonutils
from oslo_utils import excutils

from nova_ext import agent
from nova_ext import exception
from nova_ext import migration
from nova_ext import notifications
from nova_ext import opts
from nova_ext.virt import channel
from nova_ext.virt import disk
from nova_ext.virt import exports
from nova_ext.virt import extend
from nova_ext.virt import incoming
from nova_ext.virt import outgoing
from nova_ext.virt import policy
from nova_ext.virt import rbd
from nova_ext.virt import reconnect
from nova_ext.virt import state
from nova_ext.virt import swap

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def _volume_base(instance, volume_id):
    """What every fcache.volume.* and fcache.storage_move.* payload says."""
    return {'instance_uuid': instance.uuid, 'volume_id': volume_id}


class EvacuationRefused(nova_exception.NovaException):
    # A NovaException: its message, not only its class name, is what Nova
    # records as the instance's fault for the operator.
    msg_fmt = "%(reason)s"


class FcacheLibvirtDriver(incoming.IncomingMixin, outgoing.OutgoingMixin,
                          swap.SwapMixin, libvirt_driver.LibvirtDriver):

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only=read_only)
        opts.register_opts(CONF)
        # Read once, at start, like the rest of nova-compute's identity.
        conf = CONF[opts.GROUP_NAME]
        self._fcache_hostname = CONF.host
        self._fcache_my_ip = CONF.my_ip
        self._fcache_agent_socket = conf.agent_socket
        self._fcache_peer_socket = conf.peer_agent_socket
        self._fcache_migration_address = conf.migration_address
        self._fcache_state = state.Registry()
        # The servers being destroyed here after their evacuation away
        # (destroy): their write_back blocks here are stale.
        self._fcache_evacuated = set()
        self._fcache_notifier = notifications.MigrationNotifier(
            rpc.get_versioned_notifier, self._fcache_hostname)
        self._fcache_volume_notifier = notifications.VolumeNotifier(
            rpc.get_versioned_notifier, self._fcache_hostname)

    # -- agents -----------------------------------------------------------

    @property
    def _fcache_conf(self):
        return CONF[opts.GROUP_NAME]

    def _local_agent(self):
        return agent.AgentClient(self._fcache_agent_socket,
                                 self._fcache_conf.agent_timeout)

    def _peer_agent(self, host):
        """The agent of ``host`` (settling only), or None if not set up."""
        if not self._fcache_peer_socket or not host:
            return None
        return agent.AgentClient(self._fcache_peer_socket.format(host=host),
                                 self._fcache_conf.agent_timeout)

    # -- volumes ----------------------------------------------------------

    def _connect_volume(self, context, connection_info, instance,
                        encryption=None):
        super()._connect_volume(context, connection_info, instance,
                                encryption=encryption)
        pol = policy.resolve(connection_info, self._fcache_conf)
        if pol is None:
            return
        data = connection_info['data']
        volume_id = policy.agent_volume_id(connection_info)
        origin = policy.origin(connection_info)
        volume_format = data.get('format') or 'raw'
        if volume_format != 'raw':
            # Served as raw bytes, a qcow2 volume's guest would see qcow2's
            # own tables; served as qcow2 over the export, its growth would
            # meet the export's end.
            super()._disconnect_volume(context, connection_info, instance,
                                       encryption=encryption)
            raise exception.VolumeFormatNotCached(
                volume_id=volume_id, format=volume_format,
                driver=connection_info.get('driver_volume_type'))
        if not origin and not rbd.is_rbd(connection_info):
            LOG.warning("Volume %s is cacheable but its connection (%s) "
                        "gives no device path or RBD image for the fcache "
                        "agent to cache; it is used uncached", volume_id,
                        connection_info.get('driver_volume_type'),
                        instance=instance)
            return
        arriving = self._fcache_state.incoming(instance.uuid)
        if arriving is not None and self._fcache_source_is_plain(
                instance, arriving, volume_id):
            return
        try:
            origin = self._fcache_origin(connection_info)
            prepared = None
            if arriving is not None:
                prepared = self._fcache_prepare_incoming(
                    context, instance, arriving, volume_id, origin)
            if prepared is not None:
                export_uri = prepared['export_uri']
                data[policy.MIGRATION_KEY] = prepared
            else:
                LOG.debug("Attaching volume %s to the fcache agent",
                          volume_id, instance=instance)
                export_uri = self._local_agent().attach_volume(
                    volume_id, origin, cache_size=pol['cache_size'],
                    write_policy=pol['write_policy'],
                    admission=pol['admission'], rws_n=pol['rws_n'],
                    staging=pol['staging'])['export_uri']
                data.pop(policy.MIGRATION_KEY, None)
                self._fcache_volume_notifier.attach(
                    context, _volume_base(instance, volume_id), pol)
        except Exception as exc:
            if arriving is None:
                # A migration's own failures are fcache.migration.error.
                self._fcache_volume_notifier.error(
                    context, _volume_base(instance, volume_id), 'attach', exc)
            with excutils.save_and_reraise_exception():
                LOG.exception("fcache could not attach volume %s; "
                              "disconnecting it", volume_id,
                              instance=instance)
                self._fcache_forget_origin(connection_info, instance)
                super()._disconnect_volume(context, connection_info,
                                           instance, encryption=encryption)
        data.pop(policy.SOURCE_KEY, None)
        data[policy.EXPORT_KEY] = export_uri
        # Where, not the URI: its export name is what opens the export.
        LOG.info("Volume %s cached by fcache, guest disk at %s", volume_id,
                 exports.parse_export(export_uri)[2], instance=instance)

    def _fcache_origin(self, connection_info):
        """The origin the agent caches: os-brick's device, or RBD's image.

        An RBD volume's origin names a keyring written here from the
        libvirt secret Nova uses for it (:mod:`nova_ext.virt.rbd`).

        :raises nova_ext.exception.RbdKeyUnavailable: no such secret, or
            it has no readable value.
        """
        path = policy.origin(connection_info)
        if path or not rbd.is_rbd(connection_info):
            return path
        src = rbd.source(connection_info, rbd_user=CONF.libvirt.rbd_user,
                         rbd_secret_uuid=CONF.libvirt.rbd_secret_uuid)
        if not src.secret_uuid:
            return rbd.origin_string(src)
        volume_id = rbd.volume_id(connection_info)
        name = rbd.keyring_name(volume_id)
        text = rbd.keyring_text(src.user, self._fcache_ceph_key(
            src, volume_id))
        conf = self._fcache_conf
        try:
            path = rbd.write_keyring(conf.rbd_keyring_dir, name, text,
                                     group=conf.rbd_keyring_group)
        except OSError as exc:
            raise exception.RbdKeyringFailed(
                volume_id=volume_id, directory=conf.rbd_keyring_dir,
                reason=exc)
        return rbd.origin_string(src, keyring=path)

    def _fcache_ceph_key(self, src, volume_id):
        """The cephx key in libvirt secret ``src.secret_uuid`` (bytes).

        Nova's Host looks secrets up by usage only; its RBD image backend
        reads ``[libvirt] rbd_secret_uuid`` by uuid from the connection, as
        here.
        """
        def unavailable(reason):
            return exception.RbdKeyUnavailable(
                volume_id=volume_id, user=src.user,
                secret_uuid=src.secret_uuid, source=src.secret_source,
                reason=reason)
        try:
            secret = self._host.get_connection().secretLookupByUUIDString(
                src.secret_uuid)
        except Exception as exc:
            raise unavailable('cannot be found (%s)' % exc)
        try:
            key = secret.value() if secret is not None else None
        except Exception as exc:
            raise unavailable('has no value libvirt gives (%s)' % exc)
        if not key:
            raise unavailable('is not defined or has no value')
        return key

    def _fcache_forget_origin(self, connection_info, instance):
        """Remove an RBD volume's keyring; never fails the caller."""
        if not rbd.is_rbd(connection_info):
            return
        directory = self._fcache_conf.rbd_keyring_dir
        try:
            name = rbd.keyring_name(rbd.volume_id(connection_info))
            if rbd.remove_keyring(directory, name):
                LOG.debug("Removed keyring %s from %s", name, directory,
                          instance=instance)
        except (OSError, exception.FcacheException) as exc:
            LOG.warning("Could not remove the keyring of RBD volume %s "
                        "from %s: %s", rbd.volume_id(connection_info),
                        directory, exc, instance=instance)

    # -- online extend ------------------------------------------------------

    def _fcache_serve_new_size(self, connection_info, instance, new_size):
        """Have the agent serve the size os-brick found (``new_size``)."""
        volume_id = policy.agent_volume_id(connection_info)
        try:
            served = self._local_agent().extend_volume(volume_id)['size']
        except exception.FcacheException as exc:
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='the fcache agent cannot serve the new size (%s); '
                       'the guest keeps the old one' % exc)
        if served < new_size:
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='the fcache agent serves %d bytes, the storage was '
                       'extended to %d: the agent does not see the new size '
                       'of %s yet; the guest keeps the old one' % (
                           served, new_size,
                           connection_info.get('driver_volume_type')))
        LOG.info("fcache serves volume %s at its new size, %d bytes",
                 volume_id, served, instance=instance)

    def extend_volume(self, context, connection_info, instance,
                      requested_size):
        export_uri = policy.connection_data(connection_info).get(
            policy.EXPORT_KEY)
        if not export_uri:
            return super().extend_volume(context, connection_info, instance,
                                         requested_size)
        # Nova resizes the guest disk it finds by os-brick's device path
        # or the volume's serial; a cached volume's guest disk is the
        # agent's export, which QEMU must also reopen to see the new size.
        volume_id = driver_block_device.get_volume_id(connection_info)
        if connection_info.get('data', {}).get('encrypted'):
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='fcache does not grow an encrypted volume in use; '
                       'a hard reboot gives the guest the new size')
        new_size = self._extend_volume(connection_info, instance,
                                       requested_size)
        if new_size is None:
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='Failure to resize underlying volume on compute.')
        self._fcache_serve_new_size(connection_info, instance, new_size)
        guest = self._host.get_guest(instance)
        if guest.get_power_state(self._host) not in (power_state.RUNNING,
                                                     power_state.PAUSED):
            LOG.debug('Skipping block device resize, guest is not running',
                      instance=instance)
            return
        kind, _, socket = exports.parse_export(export_uri)
        found = extend.guest_disk(guest.get_xml_desc(), socket) \
            if kind == 'nbd' else None
        if found is None:
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='the guest has no NBD disk on the fcache export %s; '
                       'a hard reboot gives it the new size' % socket)
        LOG.debug("Growing fcache disk %s (export %s) to %d bytes",
                  found['target'], socket, new_size, instance=instance)
        try:
            extend.grow_guest_disk(guest._domain, found, new_size,
                                   self._fcache_conf.nbd_reconnect_delay)
        except reconnect.ReconnectError as exc:
            raise nova_exception.VolumeExtendFailed(
                volume_id=volume_id,
                reason='QEMU could not reopen the fcache disk to see its new '
                       'size (%s); the guest keeps the old one' % exc)

    # -- evacuation ---------------------------------------------------------

    def rebuild(self, context, instance, image_meta, injected_files,
                admin_password, allocations, bdms, detach_block_devices,
                attach_block_devices, network_info=None, evacuate=False,
                block_device_info=None, preserve_ephemeral=False,
                accel_uuids=None, reimage_boot_volume=False):
        # Before anything is detached or attached: an evacuation fails
        # here as a whole, and the volumes stay as they were.
        if evacuate:
            self._fcache_check_evacuation(instance, bdms)
        # LibvirtDriver has no rebuild of its own: NotImplementedError
        # makes Nova run its default one.
        return super().rebuild(
            context, instance, image_meta, injected_files, admin_password,
            allocations, bdms, detach_block_devices, attach_block_devices,
            network_info=network_info, evacuate=evacuate,
            block_device_info=block_device_info,
            preserve_ephemeral=preserve_ephemeral, accel_uuids=accel_uuids,
            reimage_boot_volume=reimage_boot_volume)

    def _fcache_check_evacuation(self, instance, bdms):
        """Refuse to evacuate away from write_back cache data (or log it).

        The source host is down: whatever its cache held and the origin
        lacks is out of reach.  (When it returns, its agent holds its old
        blocks and destroy drops them: _fcache_evacuated_away.)
        """
        write_back = []
        for bdm in bdms or []:
            info = getattr(bdm, 'connection_info', None)
            if isinstance(info, str):
                info = jsonutils.loads(info)
            pol = policy.resolve(info, self._fcache_conf)
            if pol and pol['write_policy'] == 'write_back':
                write_back.append(bdm.volume_id)
        if not write_back:
            return
        source = instance.host or 'the failed host'
        if self._fcache_conf.evacuate_write_back != 'discard':
            why = exception.WriteBackEvacuationRefused(
                volumes=', '.join(write_back), host=source)
            raise EvacuationRefused(reason=why)
        for volume_id in write_back:
            LOG.error("Evacuating with [fcache] evacuate_write_back = "
                      "discard: what volume %s's write_back cache on %s held "
                      "and its storage lacks is lost; when that host "
                      "returns its fcache-agent holds those blocks unwritten "
                      "and its nova-compute drops them as it destroys this "
                      "instance there (doc/admin/operations.rst)", volume_id,
                      source, instance=instance)

    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        # A host that comes back after its servers were evacuated: Nova's
        # _destroy_evacuated_instances destroys them here, and the
        # cleanup detaches their volumes (_fcache_release).
        evacuated = self._fcache_evacuated_away(context, instance)
        if evacuated:
            self._fcache_evacuated.add(instance.uuid)
        try:
            return super().destroy(context, instance, network_info,
                                   block_device_info=block_device_info,
                                   destroy_disks=destroy_disks,
                                   destroy_secrets=destroy_secrets)
        finally:
            self._fcache_evacuated.discard(instance.uuid)

    def _fcache_evacuated_away(self, context, instance):
        """Whether instance was evacuated from this host to another.

        What Nova's ``_destroy_evacuated_instances`` goes by: an evacuation
        from this host it accepted, started or completed.  Its blocks in
        this host's write_back caches are then older than what the server
        wrote since on its new host (the evacuation was accepted with
        ``evacuate_write_back = discard``: _fcache_check_evacuation).  Nova
        is asked only when the server's host is another one; that alone is
        not enough (a live migration rolled back on its destination has its
        source for host).
        """
        if not instance.host or instance.host == self._fcache_hostname:
            return False
        try:
            evacuations = objects.MigrationList.get_by_filters(context, {
                'source_compute': self._fcache_hostname,
                'instance_uuid': instance.uuid,
                'migration_type': 'evacuation',
                'status': ['accepted', 'pre-migrating', 'done']})
        except Exception as exc:
            # Not known to be stale: its volumes are detached as any
            # other's (their dirty blocks written back).
            LOG.warning("fcache could not look up the evacuations of this "
                        "server away from %s (%s): its volumes are "
                        "detached with their dirty blocks written back",
                        self._fcache_hostname, exc, instance=instance)
            return False
        return len(evacuations) > 0

    def _fcache_discard_stale(self, context, connection_info, instance,
                              volume_id):
        """Detach a volume of a server evacuated away, dropping dirt.

        True when done (or nothing to do), False when the volume must be
        detached as any other.  Never fails the destroy: blocks the agent
        keeps stay unwritten (an agent restart holds their write-back
        until the volume is claimed, doc/reference/ucache.rst), and the log
        says how to drop them.
        """
        if not self._fcache_kept_write_back(connection_info, volume_id):
            return False
        try:
            result = self._local_agent().detach_volume(volume_id,
                                                       discard_dirty=True)
        except exception.AgentError as exc:
            if exc.errno == errno.ENOENT:
                return True
            LOG.error("fcache agent could not drop write_back volume %s of "
                      "this server, evacuated to %s: %s. Its blocks here are "
                      "stale: once no client has its export open, drop them "
                      "with 'fcache volume-detach --discard-dirty %s'",
                      volume_id, instance.host, exc, volume_id,
                      instance=instance)
            return True
        except exception.FcacheException as exc:
            LOG.error("fcache agent unreachable to drop write_back volume %s "
                      "of this server, evacuated to %s: %s. Once it runs, "
                      "drop its stale blocks with 'fcache volume-detach "
                      "--discard-dirty %s'", volume_id, instance.host, exc,
                      volume_id, instance=instance)
            return True
        dropped = result.get('dirty_blocks_dropped') or 0
        self._fcache_volume_notifier.detach(
            context, _volume_base(instance, volume_id),
            dirty_blocks_dropped=dropped, reason='evacuated')
        if dropped:
            LOG.error("fcache dropped %d dirty blocks of write_back volume %s "
                      "without writing them back: this server was evacuated "
                      "to %s with [fcache] evacuate_write_back = discard, so "
                      "they are older than what it wrote there", dropped,
                      volume_id, instance.host, instance=instance)
        else:
            LOG.info("fcache detached write_back volume %s of this server, "
                     "evacuated to %s; it had no dirty blocks here",
                     volume_id, instance.host, instance=instance)
        return True

    # -- guests that ride out an agent restart -----------------------------

    def _create_guest(self, context, xml, instance, power_on=True,
                      pause=False, post_xml_callback=None):
        guest = super()._create_guest(context, xml, instance,
                                      power_on=power_on, pause=pause,
                                      post_xml_callback=post_xml_callback)
        if power_on or pause:
            self._fcache_ride_out_restarts(guest, instance)
        return guest

    def attach_volume(self, context, connection_info, instance, mountpoint,
                      disk_bus=None, device_type=None, encryption=None):
        super().attach_volume(context, connection_info, instance, mountpoint,
                              disk_bus=disk_bus, device_type=device_type,
                              encryption=encryption)
        if policy.connection_data(connection_info).get(policy.EXPORT_KEY):
            self._fcache_ride_out_restarts(
                self._host.get_guest(instance), instance)

    def _fcache_ride_out_restarts(self, guest, instance):
        """Let QEMU hold an fcache disk's I/O across an agent restart.

        (:mod:`nova_ext.virt.reconnect`.)  Never fails the caller: without
        it the guest runs as before, only an agent restart would give it
        I/O errors, which the warning says.
        """
        delay = self._fcache_conf.nbd_reconnect_delay
        if not delay:
            return
        try:
            xml = guest.get_xml_desc()
            # Most guests have no NBD disk on a unix socket: no agent call.
            if not isinstance(xml, str) or 'transport="unix"' not in \
                    xml.replace("'", '"'):
                return
            sockets = exports.nbd_sockets(
                self._local_agent().list_volumes()['volumes'])
            changed = reconnect.set_delay(guest._domain, sockets, delay)
            if changed:
                LOG.debug("fcache: %d disk(s) hold I/O up to %d s across an "
                          "agent restart", changed, delay, instance=instance)
        except Exception as exc:
            LOG.warning("fcache could not set the NBD reconnect delay of "
                        "this guest's fcache disks (%s): an fcache-agent "
                        "restart will give it I/O errors", exc,
                        instance=instance)

    def _get_volume_config(self, connection_info, disk_info):
        conf = super()._get_volume_config(connection_info, disk_info)
        export_uri = policy.connection_data(connection_info).get(
            policy.EXPORT_KEY)
        if export_uri:
            conf = disk.point_at_export(conf, export_uri)
        return conf

    def _disconnect_volume(self, context, connection_info, instance,
                           encryption=None, destroy_secrets=True,
                           force=False):
        if policy.is_cacheable(connection_info):
            self._fcache_release(context, connection_info, instance)
            # Released (or never attached): the agent reads the keyring
            # no more.  On a migration's source after it, or on its
            # destination after an abort, as on a detach.
            self._fcache_forget_origin(connection_info, instance)
        super()._disconnect_volume(context, connection_info, instance,
                                   encryption=encryption,
                                   destroy_secrets=destroy_secrets,
                                   force=force)

    def _fcache_brick_connect(self, context, connection_info, instance):
        """Connect through os-brick only, not through the agent."""
        super()._connect_volume(context, connection_info, instance)

    def _fcache_brick_disconnect(self, context, connection_info, instance):
        """Disconnect through os-brick only; the agent keeps its volume."""
        super()._disconnect_volume(context, connection_info, instance)

    def _fcache_release(self, context, connection_info, instance):
        volume_id = policy.agent_volume_id(connection_info)
        _, prepared = self._fcache_state.pop_prepared(instance.uuid,
                                                      volume_id)
        if prepared is not None:
            # Destination of a migration that did not switch over: the
            # abort detaches it here.
            self._fcache_abort_local(context, instance, prepared, None)
            return
        if (instance.uuid in self._fcache_evacuated and
                self._fcache_discard_stale(context, connection_info, instance,
                                           volume_id)):
            return
        base = _volume_base(instance, volume_id)
        try:
            LOG.debug("Detaching volume %s from the fcache agent", volume_id,
                      instance=instance)
            self._local_agent().detach_volume(volume_id)
            self._fcache_volume_notifier.detach(context, base)
        except exception.AgentError as exc:
            if exc.errno == errno.ENOENT:
                # Released by a migration, or never attached: nothing to do.
                return
            self._fcache_volume_notifier.error(context, base, 'detach', exc)
            if self._fcache_kept_write_back(connection_info, volume_id):
                # The agent kept dirty blocks it could not write back (the
                # origin unreachable) or a migration owns the volume.  A
                # detach that went on would let Cinder hand the volume to
                # another host while its newest data stays here: fail it,
                # and Nova rolls the volume back to in-use.
                LOG.error("fcache agent kept write_back volume %s: %s; "
                          "failing the detach", volume_id, exc,
                          instance=instance)
                raise exception.DirtyDataKept(volume_id=volume_id,
                                              reason=exc)
            # read_only, write_through: the origin holds every write; the
            # agent keeps its (clean) blocks until the operator settles
            # what holds it (a migration, doc/reference/migration.rst).
            LOG.error("fcache agent kept volume %s: %s", volume_id, exc,
                      instance=instance)

    def _fcache_kept_write_back(self, connection_info, volume_id):
        """Whether the agent caches volume_id write_back (or holds dirt).

        The agent's own word first: a retype or a swap keeps the policy the
        volume was attached with, whatever connection_info says now.
        """
        try:
            show = self._local_agent().show_volume(volume_id)
            return (show.get('write_policy') == 'write_back' or
                    bool(show.get('dirty_blocks')))
        except exception.FcacheException:
            pol = policy.resolve(connection_info, self._fcache_conf) or {}
            return pol.get('write_policy') == 'write_back'

    # -- both sides of a migration -----------------------------------------

    def _fcache_abort_local(self, context, instance, prepared, phase):
        """Abort this host's side of a migration before its switchover.

        :param phase: where the failure was seen, to report it with
            ``fcache.migration.error``; None when the other host (or an
            earlier step here) has reported it.
        """
        mid = prepared['migration_id']
        try:
            migration.abort_side(self._local_agent(), mid)
        except exception.FcacheException as exc:
            # Already aborted (a rollback reaches both hooks) or gone.
            LOG.warning("Abort of cache migration %s here: %s", mid, exc,
                        instance=instance)
            return
        LOG.info("Cache migration %s aborted on this host%s", mid,
                 ' (%s failed)' % phase if phase else '', instance=instance)
        if phase:
            self._fcache_notifier.error(
                context, channel.notification_base(instance, prepared),
                phase, exception.MigrationFailed(
                    migration_id=mid, volume_id=prepared['volume_id'],
                    phase=phase, reason='rolled back; the source keeps the '
                                        'VM and its cache'))
