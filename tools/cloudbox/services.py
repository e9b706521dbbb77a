# SPDX-License-Identifier: Apache-2.0
"""The OpenStack services of the box, in the order they depend on.

Database schemas are made (or brought up to date) by each project's own
manage command; the API services run under gunicorn (cloudbox.serve), the
others as their console scripts, all from .venv-nova, with the work tree's
nova_ext and cinder_ext first on the path.
"""

import json
import os
import sys
import urllib.request

from cloudbox import configs
from cloudbox import layout
from cloudbox import procs

_EXT = '.cpython-311-x86_64-linux-gnu.so'
SYSTEM_MODULES = ('libvirt.py', 'libvirt_qemu.py', 'libvirt_lxc.py',
                  'libvirtaio.py', 'libvirtmod' + _EXT,
                  'libvirtmod_qemu' + _EXT, 'libvirtmod_lxc' + _EXT,
                  'rados' + _EXT, 'rbd' + _EXT)
DIST_PACKAGES = '/usr/lib/python3/dist-packages'


def pylib(box):
    """Debian's libvirt, rados and rbd bindings, for the box's services only.

    They exist only as Debian packages, built for the same Python as
    .venv-nova's.  Only the box's processes see them: Nova's in-process
    tests in the same virtualenv keep their fake libvirt.
    """
    d = os.path.join(box.dir, 'pylib')
    os.makedirs(d, exist_ok=True)
    for m in SYSTEM_MODULES:
        src = os.path.join(DIST_PACKAGES, m)
        if not os.path.exists(src):
            raise procs.BoxError('%s is missing: install python3-libvirt, '
                                 'python3-rados and python3-rbd' % src)
        dst = os.path.join(d, m)
        if not os.path.lexists(dst):
            os.symlink(src, dst)
    return d


SUDO = """#!/bin/sh
# The box's services run as root already: Nova's and Cinder's
# "sudo PROJECT-rootwrap ..." needs no sudo, and Debian's sudo would reset
# PATH to one without .venv-nova/bin, where the rootwrap commands are.
exec "$@"
"""


def bindir(box):
    d = os.path.join(box.dir, 'bin')
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, 'sudo')
    with open(path, 'w') as f:
        f.write(SUDO)
    os.chmod(path, 0o755)
    return d


def env(box, **extra):
    e = {'PYTHONPATH': ':'.join([layout.ROOT,
                                 os.path.join(layout.ROOT, 'tools'),
                                 os.path.join(box.dir, 'pylib')]),
         'PATH': ':'.join([os.path.join(box.dir, 'bin'), layout.VENV_BIN,
                           os.environ.get('PATH', '')]),
         'PYTHONUNBUFFERED': '1'}
    e.update(extra)
    return e


def _bin(name):
    return os.path.join(layout.VENV_BIN, name)


def manage(box, name, *argv):
    procs.run([_bin(argv[0])] + list(argv[1:]), '%s (%s)' % (name, argv[0]),
              env=env(box), log=box.log(name + '-manage'), timeout=900)


def _http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500


def wsgi(box, name, app, extra_env=None, argv=()):
    port = layout.PORTS[name]
    procs.start(box, name, [_bin('python'), '-m', 'cloudbox.serve', name,
                            '%s:%d' % (layout.CONTROLLER_IP, port), app] +
                list(argv), env=env(box, **(extra_env or {})))


def wait_http(box, name, path='/', timeout=120):
    url = box.url(name, path)
    procs.wait_for(lambda: _http_ok(url), timeout, '%s answering at %s'
                   % (name, url), box, name)


def keystone(box):
    d = configs.keystone(box)
    conf = os.path.join(d, 'keystone.conf')
    manage(box, 'keystone', 'keystone-manage', '--config-file', conf,
           'db_sync')
    for setup in ('fernet_setup', 'credential_setup'):
        manage(box, 'keystone', 'keystone-manage', '--config-file', conf,
               setup, '--keystone-user', 'root', '--keystone-group', 'root')
    manage(box, 'keystone', 'keystone-manage', '--config-file', conf,
           'bootstrap', '--bootstrap-password', layout.PASSWORD,
           '--bootstrap-admin-url', box.url('keystone', '/v3'),
           '--bootstrap-internal-url', box.url('keystone', '/v3'),
           '--bootstrap-public-url', box.url('keystone', '/v3'),
           '--bootstrap-region-id', layout.REGION)
    wsgi(box, 'keystone', 'keystone.wsgi.api:application',
         {'OS_KEYSTONE_CONFIG_DIR': d})


def placement(box):
    d = configs.placement(box)
    manage(box, 'placement', 'placement-manage', '--config-file',
           os.path.join(d, 'placement.conf'), 'db', 'sync')
    wsgi(box, 'placement', 'placement.wsgi.api:application',
         {'OS_PLACEMENT_CONFIG_DIR': d})


def glance(box):
    d = configs.glance(box)
    manage(box, 'glance', 'glance-manage', '--config-file',
           os.path.join(d, 'glance-api.conf'), 'db_sync')
    wsgi(box, 'glance', 'glance.wsgi.api:application',
         {'OS_GLANCE_CONFIG_DIR': d})


def neutron(box):
    d = configs.neutron(box)
    confs = ['--config-file', os.path.join(d, 'neutron.conf'),
             '--config-file', os.path.join(d, 'plugins', 'ml2',
                                           'ml2_conf.ini')]
    manage(box, 'neutron', 'neutron-db-manage', *confs, 'upgrade', 'heads')
    wsgi(box, 'neutron', 'neutron.wsgi.api:application',
         {'OS_NEUTRON_CONFIG_DIR': d,
          'OS_NEUTRON_CONFIG_FILES': 'neutron.conf;plugins/ml2/ml2_conf.ini'})


def nova(box, rbd_secret_uuid):
    d = configs.nova(box, rbd_secret_uuid)
    conf = os.path.join(d, 'nova.conf')
    os.makedirs(os.path.join(box.data, 'nova', 'locks'), exist_ok=True)
    manage(box, 'nova', 'nova-manage', '--config-file', conf,
           'api_db', 'sync')
    cells = procs.run([_bin('nova-manage'), '--config-file', conf,
                       'cell_v2', 'list_cells', '--verbose'],
                      'nova-manage cell_v2 list_cells', env=env(box))
    if 'cell0' not in cells:
        manage(box, 'nova', 'nova-manage', '--config-file', conf, 'cell_v2',
               'map_cell0', '--database_connection',
               box.db_url('nova_cell0'))
    if 'cell1' not in cells:
        manage(box, 'nova', 'nova-manage', '--config-file', conf, 'cell_v2',
               'create_cell', '--name', 'cell1', '--verbose')
    manage(box, 'nova', 'nova-manage', '--config-file', conf, 'db', 'sync')
    wsgi(box, 'nova-api', 'nova.wsgi.osapi_compute:application',
         {'OS_NOVA_CONFIG_DIR': d,
          'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf'})
    for svc in ('nova-conductor', 'nova-scheduler'):
        procs.start(box, svc, [_bin(svc), '--config-file', conf],
                    env=env(box))


def cinder(box, rbd_secret_uuid):
    d = configs.cinder(box, rbd_secret_uuid)
    conf = os.path.join(d, 'cinder.conf')
    for sub in ('conversion', 'locks'):
        os.makedirs(os.path.join(box.data, 'cinder', sub), exist_ok=True)
    manage(box, 'cinder', 'cinder-manage', '--config-file', conf,
           'db', 'sync')
    wsgi(box, 'cinder-api', 'cinder.wsgi.api:application',
         argv=['--config-file', conf])
    for svc in ('cinder-scheduler', 'cinder-volume'):
        procs.start(box, svc, [_bin(svc), '--config-file', conf],
                    env=env(box))


def discover_hosts(box):
    manage(box, 'nova', 'nova-manage', '--config-file',
           os.path.join(box.etc, 'nova', 'nova.conf'), 'cell_v2',
           'discover_hosts', '--verbose')


CONTROL = ('mariadb', 'epmd', 'rabbitmq', 'keystone', 'placement', 'glance',
           'neutron', 'nova-api', 'nova-conductor', 'nova-scheduler',
           'cinder-api', 'cinder-scheduler', 'cinder-volume')


def dump(obj):
    json.dump(obj, sys.stdout, indent=2)
