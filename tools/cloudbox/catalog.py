# SPDX-License-Identifier: Apache-2.0
"""What the box holds once its services run: Keystone's catalog and
service users, the guest image, a flavor, one volume type per strategy,
and the ``fcache-box`` entry of clouds.yaml.

Everything goes through the services' APIs (openstacksdk, as
python-openstackclient does), and is created only when missing.
"""

import os

import openstack
import yaml

from cloudbox import guest
from cloudbox import layout
from cloudbox import procs

SERVICES = (
    # (user, service name, type, port name, path)
    ('placement', 'placement', 'placement', 'placement', ''),
    ('glance', 'glance', 'image', 'glance', ''),
    ('neutron', 'neutron', 'network', 'neutron', ''),
    ('nova', 'nova', 'compute', 'nova-api', '/v2.1'),
    ('cinder', 'cinderv3', 'volumev3', 'cinder-api', '/v3/$(project_id)s'),
    ('cinder', 'cinder', 'block-storage', 'cinder-api',
     '/v3/$(project_id)s'),
)
FLAVOR = 'fcache.tiny'
IMAGE = 'fcache-guest'
# Small enough for two TCG guests per host, large enough for the kernel.
FLAVOR_RAM_MB = 192
GUEST_CMDLINE = 'console=ttyS0 quiet fcache.mib=16 fcache.interval=3'
VOLUME_CACHE_SIZE = '64M'
VOLUME_WRITE_POLICY = 'write_back'


def cloud_config(box, project='admin', user='admin'):
    return {'auth': {'auth_url': box.url('keystone', '/v3'),
                     'username': user, 'password': layout.PASSWORD,
                     'project_name': project,
                     'user_domain_name': 'Default',
                     'project_domain_name': 'Default'},
            'region_name': layout.REGION,
            'identity_api_version': 3,
            'volume_api_version': 3}


def connect(box):
    cfg = cloud_config(box)
    # A kept-alive connection the API server closes as a request is sent
    # on it ends that request ("Remote end closed connection without
    # response"); keystoneauth tries such a request again on a new one.
    return openstack.connect(region_name=cfg['region_name'],
                             connect_retries=3, **cfg['auth'])


def identity(box):
    conn = connect(box)
    ident = conn.identity
    service_project = (ident.find_project('service') or
                       ident.create_project(name='service',
                                            domain_id='default'))
    roles = {}
    for role in ('admin', 'service', 'member', 'reader'):
        roles[role] = (ident.find_role(role) or
                       ident.create_role(name=role))
    users = {s[0] for s in SERVICES}
    for name in sorted(users):
        user = (ident.find_user(name, domain_id='default') or
                ident.create_user(name=name, password=layout.PASSWORD,
                                  domain_id='default'))
        for role in ('admin', 'service'):
            ident.assign_project_role_to_user(service_project, user,
                                              roles[role])
    for _, svc_name, svc_type, port_name, path in SERVICES:
        svc = ident.find_service(svc_name)
        if svc is None:
            svc = ident.create_service(name=svc_name, type=svc_type)
        have = {e.interface for e in ident.endpoints(service_id=svc.id)}
        for interface in ('public', 'internal', 'admin'):
            if interface not in have:
                ident.create_endpoint(service_id=svc.id,
                                      interface=interface,
                                      url=box.url(port_name, path),
                                      region_id=layout.REGION)


def prime_neutron(box):
    """Have neutron-server configure its database mappers before Nova asks.

    Neutron's port listing names relationships (Port.port_forwardings) that
    SQLAlchemy adds only when the mappers are first configured, by the
    first query of any other kind: in a neutron-server with no agents
    reporting in, the first request Nova makes (a port listing) would fail
    with an AttributeError.  Listing networks once configures them.
    """
    list(connect(box).network.networks())


def write_clouds_yaml(box):
    """clouds.yaml in the box, and the fcache-box entry in the user's."""
    entry = {layout.CLOUD_NAME: cloud_config(box)}
    with open(box.clouds_yaml, 'w') as f:
        yaml.safe_dump({'clouds': entry}, f, default_flow_style=False)
    user_file = os.path.expanduser('~/.config/openstack/clouds.yaml')
    os.makedirs(os.path.dirname(user_file), exist_ok=True)
    data = {}
    if os.path.exists(user_file):
        with open(user_file) as f:
            data = yaml.safe_load(f) or {}
    data.setdefault('clouds', {}).update(entry)
    tmp = user_file + '.fcache-box'
    with open(tmp, 'w') as f:
        yaml.safe_dump(data, f, default_flow_style=False)
    os.replace(tmp, user_file)


def remove_clouds_yaml_entry():
    user_file = os.path.expanduser('~/.config/openstack/clouds.yaml')
    if not os.path.exists(user_file):
        return
    with open(user_file) as f:
        data = yaml.safe_load(f) or {}
    if layout.CLOUD_NAME not in data.get('clouds', {}):
        return
    del data['clouds'][layout.CLOUD_NAME]
    tmp = user_file + '.fcache-box'
    with open(tmp, 'w') as f:
        yaml.safe_dump(data, f, default_flow_style=False)
    os.replace(tmp, user_file)


def _image(conn, name, path, disk_format, **props):
    image = conn.image.find_image(name)
    if image is not None and image.status == 'active':
        return image
    if image is not None:
        conn.image.delete_image(image)
    return conn.create_image(name, filename=path, disk_format=disk_format,
                             container_format=disk_format
                             if disk_format in ('aki', 'ari') else 'bare',
                             visibility='public', wait=True, **props)


def seed(box):
    conn = connect(box)
    files = guest.build(box.cache)
    kernel = _image(conn, IMAGE + '-kernel', files['kernel'], 'aki')
    ramdisk = _image(conn, IMAGE + '-ramdisk', files['ramdisk'], 'ari')
    _image(conn, IMAGE, files['disk'], 'raw',
           kernel_id=kernel.id, ramdisk_id=ramdisk.id,
           os_command_line=GUEST_CMDLINE, hw_disk_bus='virtio')
    if conn.compute.find_flavor(FLAVOR) is None:
        conn.compute.create_flavor(name=FLAVOR, ram=FLAVOR_RAM_MB, vcpus=1,
                                   disk=1, is_public=True)
    for strategy in layout.STRATEGIES:
        name = 'fcache-%s' % strategy
        vt = conn.block_storage.find_type(name)
        specs = {'volume_backend_name': 'ceph',
                 'cacheable': '<is> True',
                 'fcache:strategy': strategy,
                 'fcache:cache_size': VOLUME_CACHE_SIZE,
                 'fcache:write_policy': VOLUME_WRITE_POLICY}
        if vt is None:
            conn.block_storage.create_type(name=name, extra_specs=specs)
        elif vt.extra_specs != specs:
            conn.block_storage.update_type_extra_specs(vt, **specs)


def wait_computes(box, timeout=180):
    conn = connect(box)
    want = {h.name for h in box.hosts}

    def up():
        svcs = {s.host for s in conn.compute.services(binary='nova-compute')
                if s.state == 'up' and s.status == 'enabled'}
        return want <= svcs
    procs.wait_for(up, timeout, 'nova-compute up on %s' % ', '.join(sorted(
        want)))

    def hypervisors():
        return want <= {h.name for h in conn.compute.hypervisors()}
    procs.wait_for(hypervisors, timeout, 'hypervisors %s' % ', '.join(
        sorted(want)))
