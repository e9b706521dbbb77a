"""The Tempest plugin, through Tempest's own plugin manager.

No cloud runs here, so the scenario cannot: this loads the plugin the way
``tempest run`` does (the ``tempest.test_plugins`` entry point of the
installed fcache package, through ``TempestTestPluginManager``), registers
its options on a Tempest configuration, discovers its tests from the path
the plugin gives, and runs them against a tempest.conf without
``[service_available] fcache``: each class skips in ``skip_checks``,
before asking for credentials.
"""

import os
import unittest

import fixtures
from oslo_config import cfg
import testtools

from tempest.test_discover import plugins

# As tempest run lists them: idempotent id and attributes in brackets.
TEST_IDS = {
    'fcache_tempest_plugin.tests.scenario.test_live_migration.'
    'TestLiveMigrationWithHostCache.'
    'test_live_migrate_server_with_cached_volume'
    '[compute,id-b1dafad9-bcaf-46fe-9fdb-c5c899ff1105,image,slow,volume]',
    'fcache_tempest_plugin.tests.api.test_volume_type_specs.'
    'FcacheVolumeTypeSpecsTest.test_valid_specs_are_stored'
    '[id-dbb72e01-a52d-40a5-8af8-733789eeb18d]',
    'fcache_tempest_plugin.tests.api.test_volume_type_specs.'
    'FcacheVolumeTypeSpecsTest.test_invalid_spec_is_refused'
    '[id-e4b1e66b-a736-48f5-a6dc-4d7440a885ac,negative]',
}


def _ids(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _ids(test)
        else:
            yield test.id()


class TempestPluginTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.manager = plugins.TempestTestPluginManager()
        self.plugin = {e.name: e.obj for e in self.manager.ext_plugins}.get(
            'fcache')
        self.assertIsNotNone(self.plugin, 'the fcache plugin is not '
                             'installed in this environment (run '
                             'tools/setup-nova.sh)')

    def test_options_registered_and_listed(self):
        conf = cfg.ConfigOpts()
        self.plugin.register_opts(conf)
        conf([], default_config_files=[])
        self.assertFalse(conf.service_available.fcache)
        self.assertEqual('hybrid', conf.fcache.strategy)
        self.assertEqual('write_back', conf.fcache.write_policy)
        self.assertEqual({}, conf.fcache.agent_sockets)
        listed = {group: sorted(o.name for o in opts)
                  for group, opts in self.plugin.get_opt_lists()}
        self.assertEqual(
            {'fcache': ['agent_sockets', 'cache_size', 'strategy',
                        'write_policy'],
             'service_available': ['fcache']}, listed)

    def test_tests_discovered_and_skipped_without_fcache(self):
        test_dir, top_dir = self.manager.get_plugin_load_tests_tuple()[
            'fcache']
        self.assertTrue(os.path.isdir(test_dir))
        confdir = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(confdir, 'tempest.conf'), 'w') as f:
            f.write('[oslo_concurrency]\nlock_path = %s\n' % confdir)
        self.useFixture(fixtures.EnvironmentVariable(
            'TEMPEST_CONFIG_DIR', confdir))
        self.useFixture(fixtures.EnvironmentVariable(
            'TEMPEST_CONFIG', 'tempest.conf'))
        suite = unittest.TestLoader().discover(test_dir,
                                               top_level_dir=top_dir)
        self.assertEqual(TEST_IDS, set(_ids(suite)))
        result = unittest.TestResult()
        suite.run(result)
        self.assertEqual([], result.errors + result.failures)
        reasons = {reason for _, reason in result.skipped}
        self.assertEqual({'fcache is not deployed '
                          '([service_available] fcache)'}, reasons)
