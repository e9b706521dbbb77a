# SPDX-License-Identifier: Apache-2.0
"""A volume type with ``cacheable`` on Cinder's RBD back-end (Cinder 29).

Cinder's volume manager gives the ``cacheable`` capability only to pools
whose ``storage_protocol`` is iSCSI, FC or NVMe-oF
(``constants.CACHEABLE_PROTOCOLS``); RBD reports ``ceph``, so a type with
``cacheable='<is> True'`` found no RBD back-end in the scheduler's
CapabilitiesFilter.  The fix is Cinder's own back-end option
``extra_capabilities = {"cacheable": true}`` (doc/reference/cinder.rst).
Checked here with Cinder's real code end to end: the RBD driver's stats (only
its calls to the cluster faked), the volume manager's report of them, the
scheduler's BackendState and CapabilitiesFilter, and the manager's
connection_info for the volume (``cacheable`` from the type).
"""

# Cinder's test base sets up eventlet the way its services do.
import cinder.tests.unit.test as cinder_test  # noqa: I100

from unittest import mock

from cinder import context
from cinder.scheduler.filters import capabilities_filter
from cinder.scheduler import host_manager
from cinder.tests.unit import fake_constants as fake
from cinder.tests.unit import utils as test_utils
from cinder.volume.drivers import rbd as rbd_driver
from cinder.volume import manager as vol_manager

CACHEABLE_TYPE = {'resource_type': {'extra_specs': {
    'cacheable': '<is> True'}}}


class RbdCacheableTest(cinder_test.TestCase):

    def setUp(self):
        super().setUp()
        self.ctxt = context.get_admin_context()
        # What the RBD driver asks the cluster for its stats.
        for name, value in (('_get_fsid', 'fsid'),
                            ('_get_pool_stats', (90.0, 100.0)),
                            ('_supports_qos', False)):
            self._patch(name, value)
        # [backend_defaults], under the back-end section [ceph] that the
        # manager reads first (an operator sets both there).
        self.flags(rbd_exclusive_cinder_pool=True, rbd_user='cinder',
                   rbd_secret_uuid=fake.UUID1, group='backend_defaults')

    def _patch(self, name, value):
        patcher = mock.patch.object(rbd_driver.RBDDriver, name,
                                    return_value=value)
        patcher.start()
        self.addCleanup(patcher.stop)

    def _reported(self, extra_capabilities):
        self.flags(extra_capabilities=extra_capabilities,
                   group='backend_defaults')
        manager = vol_manager.VolumeManager(
            volume_driver='cinder.volume.drivers.rbd.RBDDriver',
            service_name='ceph')
        manager.driver.do_setup(self.ctxt)
        manager.driver.set_initialized()
        manager._report_driver_status(self.ctxt)
        return manager, manager.last_capabilities

    def _passes(self, capabilities):
        backend = host_manager.BackendState('cinder-volume@ceph', None)
        capabilities = dict(capabilities, timestamp=None)
        backend.update_from_volume_capability(capabilities)
        pools = list(backend.pools.values())
        self.assertEqual(1, len(pools))
        return capabilities_filter.CapabilitiesFilter().backend_passes(
            pools[0], CACHEABLE_TYPE)

    def test_rbd_is_not_cacheable_by_default(self):
        _, caps = self._reported('{}')
        self.assertEqual('ceph', caps['storage_protocol'])
        self.assertNotIn('cacheable', caps)
        self.assertFalse(self._passes(caps))

    def test_extra_capabilities_make_rbd_cacheable(self):
        manager, caps = self._reported('{"cacheable": true}')
        self.assertIs(True, caps['cacheable'])
        self.assertTrue(self._passes(caps))

        # And the volume's connection says cacheable, from its type.
        vtype = test_utils.create_volume_type(
            self.ctxt, name='cached-rbd',
            extra_specs={'cacheable': '<is> True'})
        volume = test_utils.create_volume(self.ctxt,
                                          volume_type_id=vtype.id)
        with mock.patch.object(rbd_driver.RBDDriver, '_get_mon_addrs',
                               return_value=(['192.0.2.1'], ['6789'])):
            info = manager.initialize_connection(self.ctxt, volume,
                                                 {'host': 'compute1'})
        self.assertEqual('rbd', info['driver_volume_type'])
        self.assertIs(True, info['data']['cacheable'])
        self.assertEqual(fake.UUID1, info['data']['secret_uuid'])
