# SPDX-License-Identifier: Apache-2.0
"""The services' configuration files, written from the box's layout.

Each service reads $BOX/etc/<service>/; nova-compute reads nova.conf and
then its host's nova-<host>.conf, as DevStack's nova-cpu.conf.  Values
repeat where oslo.config has multi-valued options (a key on several
lines).
"""

import os
import shutil

from cloudbox import layout


def write_ini(path, sections):
    """``sections``: [(section, [(key, value), ...]), ...]."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    lines = ['# Written by tools/cloud.sh; rewritten by every "up".']
    for section, items in sections:
        lines.append('')
        lines.append('[%s]' % section)
        for key, value in items:
            if isinstance(value, bool):
                value = 'true' if value else 'false'
            lines.append('%s = %s' % (key, value))
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def _auth(box, user):
    """keystoneauth's password plugin for the service user ``user``."""
    return [('auth_type', 'password'),
            ('auth_url', box.url('keystone', '/v3')),
            ('username', user), ('password', layout.PASSWORD),
            ('project_name', 'service'),
            ('user_domain_name', 'Default'),
            ('project_domain_name', 'Default'),
            ('region_name', layout.REGION)]


def _authtoken(box, user):
    return [('www_authenticate_uri', box.url('keystone', '/v3')),
            ('service_token_roles_required', True),
            ('service_token_roles', 'service')] + _auth(box, user)


def _venv_etc(*parts):
    return os.path.join(layout.VENV, 'etc', *parts)


def _service_dir(box, project, paste='api-paste.ini'):
    """$BOX/etc/PROJECT, with the paste file the package installed."""
    d = os.path.join(box.etc, project)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(_venv_etc(project, paste), os.path.join(d, paste))
    return d


def _common(box, name):
    return [('transport_url', box.transport_url),
            ('debug', False),
            ('use_stderr', True),
            ('state_path', os.path.join(box.data, name))]


def keystone(box):
    d = os.path.join(box.etc, 'keystone')
    write_ini(os.path.join(d, 'keystone.conf'), [
        ('DEFAULT', [('use_stderr', True)]),
        ('database', [('connection', box.db_url('keystone'))]),
        ('token', [('provider', 'fernet')]),
        ('fernet_tokens', [('key_repository',
                            os.path.join(d, 'fernet-keys'))]),
        ('credential', [('key_repository',
                         os.path.join(d, 'credential-keys'))]),
    ])
    return d


def placement(box):
    d = os.path.join(box.etc, 'placement')
    write_ini(os.path.join(d, 'placement.conf'), [
        ('DEFAULT', [('use_stderr', True)]),
        ('placement_database', [('connection', box.db_url('placement'))]),
        ('api', [('auth_strategy', 'keystone')]),
        ('keystone_authtoken', _authtoken(box, 'placement')),
    ])
    return d


def glance(box):
    d = _service_dir(box, 'glance', 'glance-api-paste.ini')
    images = os.path.join(box.data, 'glance', 'images')
    staging = os.path.join(box.data, 'glance', 'staging')
    tasks = os.path.join(box.data, 'glance', 'tasks')
    for p in (images, staging, tasks):
        os.makedirs(p, exist_ok=True)
    paste = os.path.join(d, 'glance-api-paste.ini')
    write_ini(os.path.join(d, 'glance-api.conf'), [
        ('DEFAULT', [('use_stderr', True),
                     ('enabled_backends', 'fs:file'),
                     ('transport_url', box.transport_url)]),
        ('database', [('connection', box.db_url('glance'))]),
        ('paste_deploy', [('flavor', 'keystone'),
                          ('config_file', paste)]),
        ('keystone_authtoken', _authtoken(box, 'glance')),
        ('glance_store', [('default_backend', 'fs')]),
        ('fs', [('filesystem_store_datadir', images)]),
        ('os_glance_staging_store', [('filesystem_store_datadir',
                                      staging)]),
        ('os_glance_tasks_store', [('filesystem_store_datadir', tasks)]),
        ('oslo_concurrency', [('lock_path', os.path.join(box.data,
                                                         'glance'))]),
    ])
    return d


def neutron(box):
    d = _service_dir(box, 'neutron')
    write_ini(os.path.join(d, 'neutron.conf'), [
        ('DEFAULT', [('use_stderr', True),
                     ('core_plugin', 'ml2'),
                     # Not for routers: ML2's port queries join the port
                     # forwarding model, which only these plugins load.
                     ('service_plugins', 'router,port_forwarding'),
                     ('auth_strategy', 'keystone'),
                     ('transport_url', box.transport_url),
                     ('api_paste_config', os.path.join(d, 'api-paste.ini')),
                     ('state_path', os.path.join(box.data, 'neutron'))]),
        ('database', [('connection', box.db_url('neutron'))]),
        ('keystone_authtoken', _authtoken(box, 'neutron')),
        ('nova', _auth(box, 'nova')),
        ('oslo_concurrency', [('lock_path', os.path.join(box.data,
                                                         'neutron'))]),
    ])
    # The servers have no network (--nic none): ML2 with no mechanism
    # driver; Nova only asks for ports, and finds none.
    write_ini(os.path.join(d, 'plugins', 'ml2', 'ml2_conf.ini'), [
        ('ml2', [('type_drivers', 'flat'),
                 ('tenant_network_types', ''),
                 ('mechanism_drivers', ''),
                 ('extension_drivers', '')]),
    ])
    return d


def nova(box, rbd_secret_uuid):
    d = _service_dir(box, 'nova')
    write_ini(os.path.join(d, 'nova.conf'), [
        ('DEFAULT', _common(box, 'nova') + [
            ('my_ip', layout.CONTROLLER_IP),
            ('compute_driver', 'fcache.FcacheLibvirtDriver'),
            ('instance_name_template', 'instance-%08x'),
            ('allow_resize_to_same_host', False),
            ('rootwrap_config', os.path.join(d, 'rootwrap.conf'))]),
        ('api', [('auth_strategy', 'keystone')]),
        ('wsgi', [('api_paste_config', os.path.join(d, 'api-paste.ini'))]),
        ('api_database', [('connection', box.db_url('nova_api'))]),
        ('database', [('connection', box.db_url('nova'))]),
        ('keystone_authtoken', _authtoken(box, 'nova')),
        ('service_user', [('send_service_user_token', True)] +
         _auth(box, 'nova')),
        ('placement', _auth(box, 'placement')),
        ('neutron', _auth(box, 'neutron')),
        ('cinder', [('os_region_name', layout.REGION)] +
         _auth(box, 'cinder')),
        ('glance', [('region_name', layout.REGION)]),
        ('scheduler', [('discover_hosts_in_cells_interval', 5)]),
        ('conductor', [('workers', 1)]),
        ('oslo_concurrency', [('lock_path', os.path.join(box.data, 'nova',
                                                         'locks'))]),
        ('notifications', [('notification_format', 'both')]),
        ('oslo_messaging_notifications', [('driver', 'messagingv2')]),
        # fcache-guest boots its kernel directly (an AMI): a bzImage's first
        # sector looks like an MBR whose partition entries are not, and the
        # deep inspection of images Nova fetches (the kernel again, on the
        # destination of a live migration) refuses it.  The box's images
        # are its own, built from Debian's packages
        # (doc/install/cloud-box.rst).
        ('workarounds', [('disable_deep_image_inspection', True)]),
        ('vnc', [('enabled', False)]),
        ('serial_console', [('enabled', False)]),
        ('libvirt', [('virt_type', layout.virt_type()),
                     ('cpu_mode', 'none'),
                     ('live_migration_uri', 'qemu+tcp://%s/system'),
                     ('rbd_user', 'cinder'),
                     ('rbd_secret_uuid', rbd_secret_uuid)]),
        ('fcache', [('default_strategy', 'auto'),
                    ('default_write_policy', 'write_through')]),
    ])
    for h in box.hosts:
        write_ini(h.nova_conf, [
            ('DEFAULT', [('host', h.name), ('my_ip', h.ip),
                         ('state_path', os.path.join(h.dir, 'nova')),
                         ('instances_path', box.instances_mount)]),
            ('libvirt', [('connection_uri', h.libvirt_uri),
                         ('live_migration_inbound_addr', h.ip)]),
            ('oslo_concurrency', [('lock_path', os.path.join(
                h.dir, 'nova', 'locks'))]),
            ('fcache', [('agent_socket', h.agent_socket),
                        ('rbd_keyring_dir', h.keyring_dir)]),
        ])
    _rootwrap(d, 'nova')
    return d


def cinder(box, rbd_secret_uuid):
    d = _service_dir(box, 'cinder')
    write_ini(os.path.join(d, 'cinder.conf'), [
        ('DEFAULT', _common(box, 'cinder') + [
            ('my_ip', layout.CONTROLLER_IP),
            ('host', 'box-storage'),
            ('auth_strategy', 'keystone'),
            ('api_paste_config', os.path.join(d, 'api-paste.ini')),
            ('enabled_backends', 'ceph'),
            ('default_volume_type', 'fcache-none'),
            ('osapi_volume_extension',
             'cinder.api.contrib.standard_extensions'),
            ('osapi_volume_extension', 'cinder_ext.api.Fcache_volume_policy'),
            ('image_conversion_dir', os.path.join(box.data, 'cinder',
                                                  'conversion')),
            # The filters a listing may use, as Cinder's wheel installs
            # them (its default path is /etc/cinder's).
            ('resource_query_filters_file',
             os.path.join(layout.VENV, 'etc', 'cinder',
                          'resource_filters.json')),
            ('rootwrap_config', os.path.join(d, 'rootwrap.conf'))]),
        ('database', [('connection', box.db_url('cinder'))]),
        ('keystone_authtoken', _authtoken(box, 'cinder')),
        ('service_user', [('send_service_user_token', True)] +
         _auth(box, 'cinder')),
        ('nova', _auth(box, 'nova')),
        ('oslo_concurrency', [('lock_path', os.path.join(box.data, 'cinder',
                                                         'locks'))]),
        ('oslo_messaging_notifications', [('driver', 'messagingv2')]),
        ('ceph', [('volume_driver', 'cinder.volume.drivers.rbd.RBDDriver'),
                  ('volume_backend_name', 'ceph'),
                  ('rbd_pool', 'volumes'),
                  ('rbd_ceph_conf', os.path.join(box.ceph, 'ceph.conf')),
                  ('rbd_user', 'cinder'),
                  ('rbd_secret_uuid', rbd_secret_uuid),
                  # Cinder offers "cacheable" only to iSCSI, FC and
                  # NVMe-oF pools unless told (doc/reference/cinder.rst).
                  ('extra_capabilities', '{"cacheable": true}')]),
    ])
    _rootwrap(d, 'cinder')
    return d


def _rootwrap(d, project):
    """rootwrap.conf with the filters the package installed in the venv.

    The services run as root here, but still run their privileged
    commands and privsep daemons through ``sudo PROJECT-rootwrap``, as on
    a real host: the filters and the commands must be found.
    """
    with open(_venv_etc(project, 'rootwrap.conf')) as f:
        text = f.read()
    text = text.replace('/etc/%s/rootwrap.d' % project,
                        _venv_etc(project, 'rootwrap.d'))
    text = text.replace('exec_dirs=', 'exec_dirs=%s,' % layout.VENV_BIN, 1)
    with open(os.path.join(d, 'rootwrap.conf'), 'w') as f:
        f.write(text)


def agent(box, host):
    """fcache-agent's configuration on one compute host."""
    exports = os.path.join(host.fcache_dir, 'exports')
    state = os.path.join(host.fcache_dir, 'state')
    os.makedirs(state, mode=0o700, exist_ok=True)
    write_ini(host.agent_conf, [
        ('agent', [
            ('control_socket', host.agent_socket),
            ('state_dir', state),
            ('engine', 'ucache'),
            ('cache_path', os.path.join(host.fcache_dir, 'cache.img')),
            ('cache_size', host.cache_size),
            ('block_size', '4K'),
            ('migration_listen', '%s:7440' % host.ip),
            ('export_dir', exports),
            ('export_group', 'libvirt-qemu'),
            ('origin_rbd_dirs', host.keyring_dir + '/'),
            ('log_level', 'info')]),
    ])
