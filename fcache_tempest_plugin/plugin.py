# SPDX-License-Identifier: Apache-2.0
"""The Tempest plugin class (Tempest's ``TempestPlugin`` interface)."""

import os

from tempest import config
from tempest.test_discover import plugins

from fcache_tempest_plugin import config as project_config


class FcacheTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = os.path.join(base_path, 'fcache_tempest_plugin', 'tests')
        return test_dir, base_path

    def register_opts(self, conf):
        conf.register_opt(project_config.service_option,
                          group=config.service_available_group.name)
        config.register_opt_group(conf, project_config.fcache_group,
                                  project_config.FcacheGroup)
        config.register_opt_group(conf, project_config.feature_group,
                                  project_config.FeatureGroup)

    def get_opt_lists(self):
        return [
            (project_config.fcache_group.name, project_config.FcacheGroup),
            (project_config.feature_group.name,
             project_config.FeatureGroup),
            (config.service_available_group.name,
             [project_config.service_option]),
        ]
