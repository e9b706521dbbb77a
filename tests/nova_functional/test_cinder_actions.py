# SPDX-License-Identifier: Apache-2.0
"""Cinder reading an attached volume, through Cinder 29's own API stack.

A snapshot, backup, clone or image upload reads the volume itself.  While
a compute host caches it with ``write_back``, the volume lacks what the
guest flushed into the host's cache, so ``cinder_ext.api`` refuses them
(``doc/admin/operations.rst``, "Every server and volume action, per write
policy").  As in test_cinder_api: Cinder's real v3 router, extension
manager, ``wsgi.Resource`` dispatch, schema validation, volume API,
quotas and database (sqlite); the extension loaded through
``[DEFAULT] osapi_volume_extension``, and ``cinder_ext.api.BackupGuard``
between the request context and the v3 router, where api-paste.ini puts
it.  Attachments are made the way Nova
makes them, through ``POST /attachments`` then ``PUT /attachments/{id}``
with the compute host's connector and ``os-complete``; only the volume
manager's side of ``attachment_update`` (a driver's connection, and the
database update it makes) is done here, since no cinder-volume runs.
Accepted requests stop at Cinder's RPC casts to its scheduler.
"""

# Cinder's test base sets up eventlet the way its services do.
import cinder.tests.unit.test as cinder_test  # noqa: I100

from http import HTTPStatus

from oslo_serialization import jsonutils
import webob

from cinder.api.v3 import router
from cinder import context
from cinder.db import api as db
from cinder import objects
from cinder.tests.unit.api import fakes
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import utils as test_utils
from cinder.volume import api as volume_api
from cinder.volume import volume_types

from cinder_ext import api
from cinder_ext import writeback

EXTENSIONS = ['cinder.api.contrib.standard_extensions',
              'cinder_ext.api.Fcache_volume_policy']
HOST = 'cmp1'
OTHER_HOST = 'cmp2'
REMEDY = 'openstack server remove volume'


def _fake_attachment_update(api_self, ctxt, attachment_ref, connector):
    """What cinder-volume does for ``PUT /attachments/{id}``.

    The driver's connection, with ``cacheable`` computed from the type as
    ``VolumeManager._parse_connection_options`` does, stored flat on the
    attachment, and the attachment marked attaching on the connector's
    host (``db.volume_attached(..., mark_attached=False)``).
    """
    volume = objects.Volume.get_by_id(ctxt, attachment_ref.volume_id)
    specs = volume_types.get_volume_type_extra_specs(volume.volume_type_id)
    attachment_ref.connection_info = {
        'driver_volume_type': 'iscsi', 'target_lun': 1,
        'cacheable': specs.get('cacheable') == '<is> True'}
    attachment_ref.save()
    db.volume_attached(ctxt.elevated(), attachment_ref.id,
                       attachment_ref.instance_uuid, connector['host'],
                       '/dev/vdb', 'rw', False)
    attachment_ref.refresh()
    return attachment_ref


class _Base(cinder_test.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(osapi_volume_extension=EXTENSIONS)
        self.ctxt = context.RequestContext(
            fake.USER_ID, fake.PROJECT_ID, is_admin=True, auth_token=True,
            roles=['admin', 'member', 'reader'])
        self.app = self._app(self.ctxt)
        self.mock_object(volume_api.API, 'attachment_update',
                         _fake_attachment_update)
        # A cinder-volume service in the volumes' availability zone, for
        # the clone's zone check.
        db.service_create(self.ctxt, {
            'host': 'cvol1@lvm', 'binary': 'cinder-volume',
            'topic': 'cinder-volume', 'availability_zone': 'fake_az'})
        self.types = {}
        for name, specs in (
                ('wb', {'cacheable': '<is> True',
                        'fcache:write_policy': 'write_back'}),
                ('wt', {'cacheable': '<is> True',
                        'fcache:write_policy': 'write_through'}),
                ('ro', {'cacheable': '<is> True',
                        'fcache:write_policy': 'read_only'}),
                ('default', {'cacheable': '<is> True'}),
                # Not cacheable: Nova never caches it, whatever the spec.
                ('uncached', {'fcache:write_policy': 'write_back'})):
            self.types[name] = db.volume_type_create(
                self.ctxt, {'name': name, 'extra_specs': specs})['id']

    @staticmethod
    def _app(ctxt, guard=True):
        inner = router.APIRouter()
        return fakes.wsgi_app(
            fake_auth_context=ctxt,
            inner_app_v3=api.BackupGuard(inner) if guard else inner)

    def _request(self, method, path, body=None, version='3.44', app=None):
        req = webob.Request.blank('/v3/%s%s' % (fake.PROJECT_ID, path))
        req.method = method
        req.headers['Content-Type'] = 'application/json'
        req.headers['OpenStack-API-Version'] = 'volume ' + version
        if body is not None:
            req.body = jsonutils.dump_as_bytes(body)
        res = req.get_response(app or self.app)
        return res, (jsonutils.loads(res.body) if res.body else None)

    def _volume(self, kind, **kwargs):
        kwargs.setdefault('status', 'available')
        return test_utils.create_volume(
            self.ctxt, volume_type_id=self.types[kind], **kwargs)

    def _attach(self, volume, host=HOST, instance=fake.INSTANCE_ID):
        """Nova's attach: create, update with the connector, complete."""
        res, body = self._request(
            'POST', '/attachments',
            {'attachment': {'volume_uuid': volume.id,
                            'instance_uuid': instance}})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        att_id = body['attachment']['id']
        res, body = self._request(
            'PUT', '/attachments/%s' % att_id,
            {'attachment': {'connector': {'host': host,
                                          'initiator': 'iqn.' + host}}})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        res, body = self._request(
            'POST', '/attachments/%s/action' % att_id, {'os-complete': {}})
        self.assertEqual(HTTPStatus.NO_CONTENT, res.status_int, body)
        volume.refresh()
        self.assertEqual('in-use', volume.status)
        return att_id

    def _detach(self, volume, att_id):
        """What cinder-volume does once Nova has disconnected the volume."""
        db.volume_detached(self.ctxt, volume.id, att_id)
        volume.refresh()

    def _recorded(self, att_id):
        att = objects.VolumeAttachment.get_by_id(self.ctxt, att_id)
        return att.connection_info[writeback.HOST_POLICY_KEY]

    def _snapshot(self, volume, version='3.44', force=True, app=None):
        snap = {'volume_id': volume.id, 'name': 's'}
        if force:
            snap['force'] = True
        return self._request('POST', '/snapshots', {'snapshot': snap},
                             version=version, app=app)

    def _backup(self, volume, app=None, **extra):
        backup = dict({'volume_id': volume.id, 'force': True}, **extra)
        return self._request('POST', '/backups', {'backup': backup},
                             app=app)

    def _clone(self, volume):
        return self._request(
            'POST', '/volumes',
            {'volume': {'size': volume.size, 'source_volid': volume.id}})

    def _count(self, model_get_all):
        return len(model_get_all(self.ctxt))

    def assertRefused(self, res, body, volume, att_id, host=HOST):
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int, body)
        msg = body['badRequest']['message']
        self.assertIn('fcache', msg)
        self.assertIn(volume.id, msg)
        self.assertIn('write_back', msg)
        self.assertIn(fake.INSTANCE_ID, msg)
        self.assertIn(att_id, msg)
        self.assertIn(REMEDY, msg)
        if host:
            self.assertIn('on host %s' % host, msg)
        return msg


class WriteBackAttachedTest(_Base):
    """A volume attached with write_back: every read of it is refused."""

    def setUp(self):
        super().setUp()
        self.volume = self._volume('wb')
        self.att = self._attach(self.volume)

    def test_attachment_records_the_host_policy(self):
        self.assertEqual('write_back', self._recorded(self.att))

    def test_snapshot_with_force_is_refused(self):
        res, body = self._snapshot(self.volume)
        msg = self.assertRefused(res, body, self.volume, self.att)
        self.assertIn('the policy its host caches it with', msg)
        self.assertEqual([], db.snapshot_get_all(self.ctxt))

    def test_snapshot_of_in_use_without_force_is_refused(self):
        # Since 3.66 Cinder snapshots an in-use volume without force.
        res, body = self._snapshot(self.volume, version='3.66', force=False)
        self.assertRefused(res, body, self.volume, self.att)
        self.assertEqual([], db.snapshot_get_all(self.ctxt))

    def test_backup_with_force_is_refused(self):
        res, body = self._backup(self.volume)
        self.assertRefused(res, body, self.volume, self.att)
        self.assertEqual([], db.backup_get_all(self.ctxt))

    def test_backup_without_force_is_refused_by_us_first(self):
        res, body = self._backup(self.volume, force=False)
        self.assertRefused(res, body, self.volume, self.att)

    def test_backup_needs_the_paste_filter(self):
        # Why BackupGuard exists: Cinder's standard extension Backups
        # shadows the resource a controller extension would attach to.
        # If this starts failing, Cinder fixed that and the extension
        # alone could guard backups.
        res, body = self._backup(self.volume, app=self._app(self.ctxt,
                                                            guard=False))
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)

    def test_backup_of_a_snapshot_is_left_to_cinder(self):
        # It reads the snapshot, not the volume.
        self._detach(self.volume, self.att)
        res, body = self._snapshot(self.volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        snap = body['snapshot']['id']
        db.snapshot_update(self.ctxt, snap, {'status': 'available'})
        self.att = self._attach(self.volume)
        res, body = self._backup(self.volume, snapshot_id=snap)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)

    def test_clone_is_refused(self):
        before = len(db.volume_get_all(self.ctxt))
        res, body = self._clone(self.volume)
        self.assertRefused(res, body, self.volume, self.att)
        self.assertEqual(before, len(db.volume_get_all(self.ctxt)))

    def test_upload_to_image_with_force_is_refused(self):
        res, body = self._request(
            'POST', '/volumes/%s/action' % self.volume.id,
            {'os-volume_upload_image': {'image_name': 'img',
                                        'force': True}})
        self.assertRefused(res, body, self.volume, self.att)

    def test_non_admin_is_not_told_the_host(self):
        user = context.RequestContext(
            fake.USER_ID, fake.PROJECT_ID, is_admin=False, auth_token=True,
            roles=['member', 'reader'])
        app = self._app(user)
        res, body = self._snapshot(self.volume, app=app)
        msg = self.assertRefused(res, body, self.volume, self.att, host=None)
        self.assertNotIn(HOST, msg)

    def test_retype_in_place_does_not_lift_the_refusal(self):
        # A back-end retypes an in-use volume in place (driver.retype)
        # without telling Nova: the host still caches with write_back.
        db.volume_update(self.ctxt, self.volume.id,
                         {'volume_type_id': self.types['wt']})
        res, body = self._snapshot(self.volume)
        self.assertRefused(res, body, self.volume, self.att)

    def test_detached_volume_is_snapshotted(self):
        # Nova's detach had the agent write every dirty block back.
        self._detach(self.volume, self.att)
        self.assertEqual('available', self.volume.status)
        res, body = self._snapshot(self.volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(1, len(db.snapshot_get_all(self.ctxt)))

    def test_live_migration_destination_inherits_write_back(self):
        # The type changed in place meanwhile; the destination agent
        # still takes the source agent's write policy.
        db.volume_update(self.ctxt, self.volume.id,
                         {'volume_type_id': self.types['wt']})
        dest = self._attach(self.volume, host=OTHER_HOST)
        self.assertEqual('write_back', self._recorded(dest))
        # Migration done: the source's attachment goes.
        self._detach(self.volume, self.att)
        res, body = self._snapshot(self.volume)
        self.assertRefused(res, body, self.volume, dest, host=OTHER_HOST)

    def test_swap_target_inherits_write_back(self):
        # Cinder migrating the in-use volume: Nova attaches the new volume
        # (migration_status target:<old>) and the agent moves the volume
        # under the cache it attached with write_back.
        new = self._volume('wt', migration_status='target:%s' %
                           self.volume.id)
        new_att = self._attach(new)
        self.assertEqual('write_back', self._recorded(new_att))


class MarkedDetachedTest(_Base):
    """Admin actions that end an attachment without its host.

    A force-detach and a reset of the attach status let Cinder treat the
    volume as detached while the host's write_back cache may still hold
    writes it lacks: refused for write_back, left to Cinder otherwise.
    Cinder's volume service is not running: its side of a force-detach
    (terminate the connection, detach) is mocked, and called only when
    the request gets past the guard.
    """

    def setUp(self):
        super().setUp()
        self.terminate = self.mock_object(volume_api.API,
                                          'terminate_connection')
        self.detach = self.mock_object(volume_api.API, 'detach')

    def _force_detach(self, volume, att_id):
        return self._request(
            'POST', '/volumes/%s/action' % volume.id,
            {'os-force_detach': {'attachment_id': att_id,
                                 'connector': {'host': HOST}}})

    def _reset_status(self, volume, **status):
        return self._request('POST', '/volumes/%s/action' % volume.id,
                             {'os-reset_status': status})

    def _refused(self, res, body, volume, att):
        msg = self.assertRefused(res, body, volume, att)
        self.assertIn('openstack volume attachment delete %s' % att, msg)
        volume.refresh()
        self.assertEqual(('in-use', 'attached'),
                         (volume.status, volume.attach_status))
        return msg

    def test_force_detach_of_write_back_is_refused(self):
        volume = self._volume('wb')
        att = self._attach(volume)
        res, body = self._force_detach(volume, att)
        msg = self._refused(res, body, volume, att)
        self.assertIn('will not force-detach', msg)
        self.terminate.assert_not_called()
        self.detach.assert_not_called()

    def test_only_the_named_attachment_counts(self):
        # Attached write_through, retyped in place to write_back, then
        # attached on a second host (a live migration's destination),
        # which caches it write_back.
        volume = self._volume('wt')
        first = self._attach(volume)
        db.volume_update(self.ctxt, volume.id,
                         {'volume_type_id': self.types['wb']})
        second = self._attach(volume, host=OTHER_HOST)
        self.assertEqual(('write_through', 'write_back'),
                         (self._recorded(first), self._recorded(second)))
        res, body = self._force_detach(volume, second)
        self.assertRefused(res, body, volume, second, host=OTHER_HOST)
        self.detach.assert_not_called()
        res, body = self._force_detach(volume, first)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.detach.assert_called_once()

    def test_force_detach_of_write_through_is_left_to_cinder(self):
        volume = self._volume('wt')
        att = self._attach(volume)
        res, body = self._force_detach(volume, att)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.terminate.assert_called_once()
        self.detach.assert_called_once()

    def test_reset_to_detached_is_refused(self):
        volume = self._volume('wb')
        att = self._attach(volume)
        for status in ({'attach_status': 'detached'},
                       {'status': 'available'},
                       {'status': 'error', 'attach_status': 'detached'}):
            res, body = self._reset_status(volume, **status)
            msg = self._refused(res, body, volume, att)
            self.assertIn('will not reset the attach status of', msg)

    def test_reset_that_keeps_it_attached_is_left_to_cinder(self):
        volume = self._volume('wb')
        self._attach(volume)
        res, body = self._reset_status(volume, status='in-use')
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        res, body = self._reset_status(volume, migration_status='none')
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)

    def test_write_through_reset_is_left_to_cinder(self):
        volume = self._volume('wt')
        self._attach(volume)
        res, body = self._reset_status(volume, status='available',
                                       attach_status='detached')
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        volume.refresh()
        self.assertEqual('available', volume.status)


class WriteBackDetachedTest(_Base):

    def test_available_volume_is_read(self):
        volume = self._volume('wb')
        res, body = self._snapshot(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        res, body = self._clone(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(volume.id, body['volume']['source_volid'])
        # Last: Cinder marks the volume backing-up.
        res, body = self._backup(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(1, len(db.snapshot_get_all(self.ctxt)))
        self.assertEqual(1, len(db.backup_get_all(self.ctxt)))


class OtherPoliciesAttachedTest(_Base):
    """Write-through and read-only: Cinder may read the attached volume.

    The volume has every write the guest's flushes acknowledged.
    """

    def _all_accepted(self, kind):
        volume = self._volume(kind)
        att = self._attach(volume)
        res, body = self._snapshot(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        res, body = self._snapshot(volume, version='3.66', force=False)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        res, body = self._clone(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(volume.id, body['volume']['source_volid'])
        res, body = self._backup(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(2, len(db.snapshot_get_all(self.ctxt)))
        self.assertEqual(1, len(db.backup_get_all(self.ctxt)))
        return volume, att

    def test_write_through_is_read(self):
        _volume, att = self._all_accepted('wt')
        self.assertEqual('write_through', self._recorded(att))

    def test_read_only_is_read(self):
        _volume, att = self._all_accepted('ro')
        self.assertEqual('read_only', self._recorded(att))

    def test_uncacheable_type_is_read(self):
        # fcache:write_policy without cacheable: Nova does not cache it.
        volume, att = self._all_accepted('uncached')
        self.assertIsNone(self._recorded(att))

    def test_retype_to_write_back_in_place_is_still_read(self):
        # The host keeps caching with write_through, as attached.
        volume = self._volume('wt')
        self._attach(volume)
        db.volume_update(self.ctxt, volume.id,
                         {'volume_type_id': self.types['wb']})
        res, body = self._snapshot(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)

    def test_compute_default_follows_cinder_conf(self):
        volume = self._volume('default')
        att = self._attach(volume)
        self.assertEqual(writeback.COMPUTE_DEFAULT, self._recorded(att))
        res, body = self._snapshot(volume)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.flags(compute_default_write_policy='write_back',
                   group='fcache')
        res, body = self._snapshot(volume)
        msg = self.assertRefused(res, body, volume, att)
        self.assertIn('compute_default_write_policy', msg)

    def test_attachment_without_record_falls_back_to_the_type(self):
        # Attached before cinder_ext recorded the host's policy.
        volume = self._volume('wb', status='in-use')
        att = objects.VolumeAttachment(
            self.ctxt, volume_id=volume.id, attach_status='attached',
            instance_uuid=fake.INSTANCE_ID, attached_host=HOST)
        att.create()
        att.connection_info = {'driver_volume_type': 'iscsi',
                               'cacheable': True}
        att.save()
        res, body = self._snapshot(volume)
        msg = self.assertRefused(res, body, volume, att.id)
        self.assertIn("volume type's fcache:write_policy", msg)


class GroupTest(_Base):
    """A group snapshot or a group cloned from a group reads each volume."""

    def setUp(self):
        super().setUp()
        self.gtype = db.group_type_create(
            self.ctxt, {'name': 'g', 'group_specs': {}})['id']

    def _group_with(self, kind):
        group = test_utils.create_group(
            self.ctxt, group_type_id=self.gtype,
            volume_type_ids=[self.types[kind]])
        plain = self._volume(kind, group_id=group.id)
        volume = self._volume(kind, group_id=group.id)
        return group, plain, volume, self._attach(volume)

    def _group_snapshot(self, group):
        return self._request('POST', '/group_snapshots',
                             {'group_snapshot': {'group_id': group.id,
                                                 'name': 'gs'}})

    def test_group_snapshot_is_refused(self):
        group, _plain, volume, att = self._group_with('wb')
        res, body = self._group_snapshot(group)
        self.assertRefused(res, body, volume, att)
        self.assertEqual([], db.group_snapshot_get_all(self.ctxt))

    def test_group_clone_is_refused(self):
        group, _plain, volume, att = self._group_with('wb')
        res, body = self._request(
            'POST', '/groups/action',
            {'create-from-src': {'source_group_id': group.id,
                                 'name': 'copy'}})
        self.assertRefused(res, body, volume, att)
        self.assertEqual(1, len(db.group_get_all(self.ctxt)))

    def test_write_through_group_snapshot_is_taken(self):
        group, _plain, _volume, _att = self._group_with('wt')
        res, body = self._group_snapshot(group)
        self.assertEqual(HTTPStatus.ACCEPTED, res.status_int, body)
        self.assertEqual(1, len(db.group_snapshot_get_all(self.ctxt)))
