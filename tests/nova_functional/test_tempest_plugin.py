# SPDX-License-Identifier: Apache-2.0
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
import subprocess
import sys
import unittest

import fixtures
from oslo_config import cfg
import testtools

from tempest.test_discover import plugins

from fcache_tempest_plugin.config import STRATEGIES

# As tempest run lists them: idempotent id and attributes in brackets.
SCENARIO = ('fcache_tempest_plugin.tests.scenario.test_live_migration.'
            'TestLiveMigrationWithHostCache.test_live_migrate_%s'
            '[compute,id-%s,image,slow,volume]')
CONSOLE = ('fcache_tempest_plugin.tests.scenario.'
           'test_console_live_migration.TestConsoleLiveMigration%s.'
           'test_console_live_migrate_%s'
           '[compute,id-0d6f1c56-8b0e-4c43-9b53-2f3b8d0f7a0%d,image,slow,'
           'volume]')
TEST_IDS = {
    CONSOLE % ('None', 'none', 1), CONSOLE % ('Cachemior', 'cachemior', 2),
    CONSOLE % ('Firepan', 'firepan', 3),
    CONSOLE % ('FirepanIf', 'firepan_if', 4),
    CONSOLE % ('Cloudcache', 'cloudcache', 5),
    CONSOLE % ('Hybrid', 'hybrid', 6), CONSOLE % ('Auto', 'auto', 7),
    SCENARIO % ('hybrid', 'b1dafad9-bcaf-46fe-9fdb-c5c899ff1105'),
    SCENARIO % ('none', '6368e904-ca6d-4870-96cb-04810797b5d4'),
    SCENARIO % ('cachemior', 'eb5d59aa-72ed-4ad3-b6f9-4e0b96b55f1f'),
    SCENARIO % ('firepan', '0c09727a-80dc-4d6c-b093-ad6a3b6f03a5'),
    SCENARIO % ('firepan_if', '203931fc-04f1-4507-8fde-a5b67aff2ba7'),
    SCENARIO % ('cloudcache', 'ab4b83ff-c591-4009-ae97-4babd06da8d0'),
    SCENARIO % ('auto', '5a8d81c6-01dd-443b-bb27-7efb9793cb4f'),
    'fcache_tempest_plugin.tests.api.test_volume_type_specs.'
    'FcacheVolumeTypeSpecsTest.test_valid_specs_are_stored'
    '[id-dbb72e01-a52d-40a5-8af8-733789eeb18d]',
    'fcache_tempest_plugin.tests.api.test_volume_type_specs.'
    'FcacheVolumeTypeSpecsTest.test_invalid_spec_is_refused'
    '[id-e4b1e66b-a736-48f5-a6dc-4d7440a885ac,negative]',
}


REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


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
        self.assertEqual('write_back', conf.fcache.write_policy)
        self.assertEqual(16, conf.fcache.data_size_mb)
        self.assertEqual({}, conf.fcache.agent_sockets)
        self.assertFalse(conf.fcache.guest_console)
        self.assertTrue(conf.fcache_feature_enabled.firepan_if)
        listed = {group: sorted(o.name for o in opts)
                  for group, opts in self.plugin.get_opt_lists()}
        self.assertEqual(
            {'fcache': ['agent_sockets', 'cache_size', 'data_size_mb',
                        'guest_console', 'write_policy'],
             'fcache_feature_enabled': sorted(STRATEGIES),
             'service_available': ['fcache']}, listed)

    def test_bad_option_value_is_refused(self):
        conf = cfg.ConfigOpts()
        self.plugin.register_opts(conf)
        confdir = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(confdir, 'tempest.conf')
        with open(path, 'w') as f:
            f.write('[fcache]\ndata_size_mb = 0\n')
        conf(['--config-file', path], default_config_files=[])
        self.assertRaises(cfg.ConfigFileValueError,
                          lambda: conf.fcache.data_size_mb)

    def _check_uuid(self, package, path):
        check = os.path.join(os.path.dirname(sys.executable), 'check-uuid')
        env = dict(os.environ, PYTHONPATH=path)
        return subprocess.run([check, '--package', package], env=env,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              universal_newlines=True)

    def test_every_test_has_a_unique_idempotent_id(self):
        # Tempest's own checker, as the plugin's gate would run it.
        result = self._check_uuid('fcache_tempest_plugin', REPO)
        self.assertEqual(0, result.returncode, result.stdout)

    def test_uuid_checker_catches_a_test_without_id(self):
        top = self.useFixture(fixtures.TempDir()).path
        pkg = os.path.join(top, 'badplugin', 'tests')
        os.makedirs(pkg)
        for d in (os.path.dirname(pkg), pkg):
            open(os.path.join(d, '__init__.py'), 'w').close()
        with open(os.path.join(pkg, 'test_x.py'), 'w') as f:
            f.write('from tempest import test\n\n\n'
                    'class XTest(test.BaseTestCase):\n\n'
                    '    def test_no_id(self):\n        pass\n')
        result = self._check_uuid('badplugin', top)
        self.assertNotEqual(0, result.returncode, result.stdout)
        self.assertIn('idempotent_id', result.stdout)

    def test_tempest_run_lists_the_tests(self):
        # What CI and an operator see: tempest run --list-tests in a
        # workspace made by tempest init, with the plugin installed (its
        # entry point); the work tree's copy first, as for the other tests.
        work = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable('PYTHONPATH', REPO))
        tempest = os.path.join(os.path.dirname(sys.executable), 'tempest')
        # tempest init registers the workspace by name in
        # ~/.tempest/workspace.yaml: a fresh name, unregistered after.
        name = 'fcache-' + os.path.basename(work)
        subprocess.run([tempest, 'init', '--name', name, 'ws'], cwd=work,
                       check=True, stdout=subprocess.DEVNULL)
        self.addCleanup(subprocess.run,
                        [tempest, 'workspace', 'remove', '--name', name],
                        stdout=subprocess.DEVNULL)
        listed = subprocess.run(
            [tempest, 'run', '--list-tests', '--regex',
             r'^fcache_tempest_plugin\.'],
            cwd=os.path.join(work, 'ws'), check=True,
            stdout=subprocess.PIPE, universal_newlines=True).stdout
        self.assertEqual(TEST_IDS, {line.strip()
                                    for line in listed.splitlines()
                                    if line.startswith('fcache_')})

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
