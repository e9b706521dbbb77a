# SPDX-License-Identifier: Apache-2.0
"""cinder_ext.api through Cinder 29's own API stack.

Cinder's real v3 ``APIRouter``, extension manager, ``wsgi.Resource``
dispatch, JSON-schema validation and database (sqlite, Cinder's own test
base) handle every request; the extension is loaded exactly as an operator
loads it, through ``[DEFAULT] osapi_volume_extension``.  Only the volume
backend is faked (``attachment_update`` returns what a driver would), since
no cinder-volume service runs here.
"""

# Cinder's test base sets up eventlet the way its services do.
import cinder.tests.unit.test as cinder_test  # noqa: I100

from http import HTTPStatus

from oslo_serialization import jsonutils
import webob

from cinder import context
from cinder.db import api as db
from cinder import exception as cinder_exception
from cinder import objects
from cinder.tests.unit.api import fakes
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import utils as test_utils
from cinder.volume import api as volume_api

EXTENSIONS = ['cinder.api.contrib.standard_extensions',
              'cinder_ext.api.Fcache_volume_policy']


class CinderApiExtensionTest(cinder_test.TestCase):

    def setUp(self):
        super().setUp()
        self.flags(osapi_volume_extension=EXTENSIONS)
        self.ctxt = context.RequestContext(
            fake.USER_ID, fake.PROJECT_ID, is_admin=True, auth_token=True,
            roles=['admin', 'member', 'reader'])
        self.app = fakes.wsgi_app(fake_auth_context=self.ctxt)
        self.vtype = db.volume_type_create(
            self.ctxt, {'name': 'cached', 'extra_specs': {}})

    def _request(self, method, path, body=None, version='3.44'):
        req = webob.Request.blank('/v3/%s%s' % (fake.PROJECT_ID, path))
        req.method = method
        req.headers['Content-Type'] = 'application/json'
        req.headers['OpenStack-API-Version'] = 'volume ' + version
        if body is not None:
            req.body = jsonutils.dump_as_bytes(body)
        res = req.get_response(self.app)
        return res, (jsonutils.loads(res.body) if res.body else None)

    def _specs(self):
        return db.volume_type_extra_specs_get(self.ctxt, self.vtype['id'])

    # -- validation on "openstack volume type set --property" ---------------

    def test_valid_specs_are_stored(self):
        res, body = self._request(
            'POST', '/types/%s/extra_specs' % self.vtype['id'],
            {'extra_specs': {'fcache:strategy': 'firepan_if',
                             'fcache:cache_size': '2G',
                             'fcache:wear_weight': '0.3',
                             'volume_backend_name': 'lvm'}})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        self.assertEqual('firepan_if', self._specs()['fcache:strategy'])
        self.assertEqual('2G', self._specs()['fcache:cache_size'])

    def test_invalid_value_is_refused_with_key_value_and_allowed(self):
        res, body = self._request(
            'POST', '/types/%s/extra_specs' % self.vtype['id'],
            {'extra_specs': {'fcache:strategy': 'warp',
                             'volume_backend_name': 'lvm'}})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        msg = body['badRequest']['message']
        self.assertIn('fcache:strategy', msg)
        self.assertIn("'warp'", msg)
        self.assertIn('firepan_if', msg)
        # Nothing of the request is stored, not even the valid key.
        self.assertEqual({}, self._specs())

    def test_invalid_size_is_refused(self):
        res, body = self._request(
            'POST', '/types/%s/extra_specs' % self.vtype['id'],
            {'extra_specs': {'fcache:cache_size': '10 parsecs'}})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('fcache:cache_size', body['badRequest']['message'])

    def test_unknown_fcache_key_is_refused(self):
        res, body = self._request(
            'POST', '/types/%s/extra_specs' % self.vtype['id'],
            {'extra_specs': {'fcache:colour': 'blue'}})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('unknown fcache key', body['badRequest']['message'])

    def test_update_of_one_key_is_validated(self):
        path = '/types/%s/extra_specs/fcache:wear_weight' % self.vtype['id']
        res, body = self._request('PUT', path, {'fcache:wear_weight': '1.5'})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('from 0 to 1', body['badRequest']['message'])
        res, body = self._request('PUT', path, {'fcache:wear_weight': '0.5'})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        self.assertEqual('0.5', self._specs()['fcache:wear_weight'])

    def test_type_create_with_invalid_property_is_refused(self):
        res, body = self._request(
            'POST', '/types',
            {'volume_type': {'name': 'bad',
                             'extra_specs': {'fcache:admission': 'some'}}})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('fcache:admission', body['badRequest']['message'])
        self.assertRaises(cinder_exception.VolumeTypeNotFoundByName,
                          db.volume_type_get_by_name, self.ctxt, 'bad')

    def test_type_create_with_valid_property(self):
        res, body = self._request(
            'POST', '/types',
            {'volume_type': {'name': 'good',
                             'extra_specs': {'fcache:admission': 'rws',
                                             'fcache:rws_n': '3',
                                             'fcache:staging': 'data'}}})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        self.assertEqual('rws', body['volume_type']['extra_specs'][
            'fcache:admission'])
        self.assertEqual('data', body['volume_type']['extra_specs'][
            'fcache:staging'])

    def test_type_create_with_rws_n_beyond_the_agent_is_refused(self):
        res, body = self._request(
            'POST', '/types',
            {'volume_type': {'name': 'rws8',
                             'extra_specs': {'fcache:admission': 'rws',
                                             'fcache:rws_n': '8'}}})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('fcache:rws_n', body['badRequest']['message'])
        self.assertIn('from 1 to 7', body['badRequest']['message'])
        self.assertRaises(cinder_exception.VolumeTypeNotFoundByName,
                          db.volume_type_get_by_name, self.ctxt, 'rws8')

    # -- the bridge: policy in connection_info --------------------------------

    def _attachment(self, specs):
        db.volume_type_extra_specs_update_or_create(
            self.ctxt, self.vtype['id'], specs)
        volume = test_utils.create_volume(
            self.ctxt, volume_type_id=self.vtype['id'], status='reserved')
        attachment = objects.VolumeAttachment(
            self.ctxt, volume_id=volume.id, attach_status='reserved',
            instance_uuid=fake.INSTANCE_ID)
        attachment.create()
        return volume, attachment

    def _update_attachment(self, attachment, conn):
        def fake_update(api_self, ctxt, attachment_ref, connector):
            # What the volume manager stores: the driver's data, flattened
            # (cinder.volume.manager._connection_create).
            attachment_ref.connection_info = conn
            attachment_ref.save()
            return attachment_ref
        self.mock_object(volume_api.API, 'attachment_update', fake_update)
        return self._request(
            'PUT', '/attachments/%s' % attachment.id,
            {'attachment': {'connector': {'host': 'cmp1',
                                          'initiator': 'iqn.x'}}})

    def test_policy_reaches_attachment_connection_info(self):
        _volume, attachment = self._attachment(
            {'cacheable': '<is> True', 'fcache:strategy': 'hybrid',
             'fcache:cache_size': '512M', 'fcache:rate_limit': '200'})
        res, body = self._update_attachment(
            attachment, {'driver_volume_type': 'iscsi', 'cacheable': True,
                         'target_lun': 1})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        info = body['attachment']['connection_info']
        self.assertTrue(info['cacheable'])
        self.assertEqual({'strategy': 'hybrid', 'cache_size': 512 << 20,
                          'rate_limit': 200.0}, info['fcache'])

    def test_type_without_fcache_keys_adds_nothing(self):
        _volume, attachment = self._attachment({'cacheable': '<is> True'})
        res, body = self._update_attachment(
            attachment, {'driver_volume_type': 'iscsi', 'cacheable': True})
        self.assertEqual(HTTPStatus.OK, res.status_int, body)
        self.assertNotIn('fcache', body['attachment']['connection_info'])

    def test_stored_invalid_policy_fails_the_attach_clearly(self):
        # Written straight to the database, as before validation existed.
        _volume, attachment = self._attachment({'fcache:strategy': 'warp'})
        res, body = self._update_attachment(
            attachment, {'driver_volume_type': 'iscsi'})
        self.assertEqual(HTTPStatus.BAD_REQUEST, res.status_int)
        self.assertIn('fcache:strategy', body['badRequest']['message'])
