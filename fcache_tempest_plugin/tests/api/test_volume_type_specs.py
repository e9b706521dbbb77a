# SPDX-License-Identifier: Apache-2.0
"""cinder-api refuses a bad ``fcache:`` extra spec and stores nothing."""

from tempest.api.volume import base
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from fcache_tempest_plugin.common import deployed


class FcacheVolumeTypeSpecsTest(base.BaseVolumeAdminTest):

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        deployed.skip_unless_deployed(cls)

    @decorators.idempotent_id('dbb72e01-a52d-40a5-8af8-733789eeb18d')
    def test_valid_specs_are_stored(self):
        volume_type = self.create_volume_type()
        specs = {'fcache:strategy': 'hybrid', 'fcache:cache_size': '10G',
                 'fcache:write_policy': 'write_back'}
        self.admin_volume_types_client.create_volume_type_extra_specs(
            volume_type['id'], specs)
        stored = self.admin_volume_types_client.list_volume_types_extra_specs(
            volume_type['id'])['extra_specs']
        self.assertEqual(specs, {k: v for k, v in stored.items()
                                 if k.startswith('fcache:')})

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('e4b1e66b-a736-48f5-a6dc-4d7440a885ac')
    def test_invalid_spec_is_refused(self):
        volume_type = self.create_volume_type()
        self.assertRaises(
            lib_exc.BadRequest,
            self.admin_volume_types_client.create_volume_type_extra_specs,
            volume_type['id'], {'fcache:strategy': 'warp'})
        stored = self.admin_volume_types_client.list_volume_types_extra_specs(
            volume_type['id'])['extra_specs']
        self.assertNotIn('fcache:strategy', stored)
