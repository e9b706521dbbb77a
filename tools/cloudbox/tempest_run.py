# SPDX-License-Identifier: Apache-2.0
"""Tempest, configured for the box, running fcache's plugin against it.

A Tempest workspace in $BOX/tempest (``tempest init``), its tempest.conf
written from the box: the admin credentials, fcache-guest and fcache.tiny,
two compute hosts, no SSH validation (the guest reports on its console),
and each host's agent socket for the plugin's cache checks.
"""

import os
import subprocess

from cloudbox import catalog
from cloudbox import configs
from cloudbox import layout
from cloudbox import procs
from cloudbox import services


WORKSPACE = 'fcache-box'
# Scenarios for clouds whose guests are reached over SSH: the box's guests
# have no network and report on their console, which the
# test_console_live_migration scenarios read instead.
NOT_FOR_THE_BOX = r'\.TestLiveMigrationWithHostCache\.'


def workspace(box):
    return os.path.join(box.dir, 'tempest')


def _tempest(*args):
    return [os.path.join(layout.VENV_BIN, 'tempest')] + list(args)


def forget_workspace(box):
    """Unregister the workspace (~/.tempest/workspace.yaml) if it is."""
    subprocess.run(_tempest('workspace', 'remove', '--name', WORKSPACE),
                   capture_output=True, env=dict(os.environ,
                                                 **services.env(box)))


def configure(box):
    ws = workspace(box)
    if not os.path.exists(os.path.join(ws, 'etc')):
        # A workspace of an earlier box, gone with it, is still registered.
        forget_workspace(box)
        procs.run(_tempest('init', '--name', WORKSPACE, ws), 'tempest init',
                  env=services.env(box))
    conn = catalog.connect(box)
    image = conn.image.find_image(catalog.IMAGE)
    flavor = conn.compute.find_flavor(catalog.FLAVOR)
    if image is None or flavor is None:
        raise procs.BoxError('the box has no %s image or %s flavor: run '
                             'tools/cloud.sh up' % (catalog.IMAGE,
                                                    catalog.FLAVOR))
    sockets = ','.join('%s:%s' % (h.name, h.agent_socket)
                       for h in box.hosts)
    conf = os.path.join(ws, 'etc', 'tempest.conf')
    configs.write_ini(conf, [
        # With the services' logs, which outlive the box.
        ('DEFAULT', [('log_file', box.log('tempest'))]),
        ('auth', [('admin_username', 'admin'),
                  ('admin_password', layout.PASSWORD),
                  ('admin_project_name', 'admin'),
                  ('admin_domain_name', 'Default'),
                  ('use_dynamic_credentials', True),
                  ('create_isolated_networks', False)]),
        ('identity', [('uri_v3', box.url('keystone', '/v3')),
                      ('auth_version', 'v3'),
                      ('region', layout.REGION)]),
        ('compute', [('image_ref', image.id),
                     ('flavor_ref', flavor.id),
                     ('min_compute_nodes', len(box.hosts)),
                     ('build_timeout', 300),
                     ('build_interval', 2)]),
        ('compute-feature-enabled', [('live_migration', True),
                                     ('block_migration_for_live_migration',
                                      False),
                                     ('volume_backed_live_migration', True),
                                     ('console_output', True)]),
        ('volume', [('catalog_type', 'volumev3'),
                    ('volume_size', 1),
                    ('build_timeout', 300)]),
        ('validation', [('run_validation', False)]),
        ('service_available', [('cinder', True), ('glance', True),
                               ('nova', True), ('neutron', True),
                               ('swift', False), ('fcache', True)]),
        ('fcache', [('guest_console', True),
                    ('agent_sockets', sockets),
                    ('cache_size', catalog.VOLUME_CACHE_SIZE),
                    ('write_policy', catalog.VOLUME_WRITE_POLICY)]),
    ])
    return conf


def run(box, regex, concurrency=1):
    configure(box)
    env = services.env(box)
    proc = subprocess.run(
        _tempest('run', '--regex', regex, '--exclude-regex', NOT_FOR_THE_BOX,
                 '--concurrency', str(concurrency)),
        cwd=workspace(box), env=dict(os.environ, **env))
    return proc.returncode
