# SPDX-License-Identifier: Apache-2.0
"""Where everything of a box lives: directories, addresses, ports, names.

One box per machine: its bridge, namespaces and ports are fixed, so that
``status`` and ``down`` find them from the directory alone.
"""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VENV = os.path.join(ROOT, '.venv-nova')
VENV_BIN = os.path.join(VENV, 'bin')
AGENT_BIN = os.path.join(ROOT, 'fcache_agent', 'build', 'fcache-agent')

BRIDGE = 'fcbox0'
PREFIX = '10.79.0'
CONTROLLER_IP = PREFIX + '.1'
NETMASK = 24
REGION = 'RegionOne'
CLOUD_NAME = 'fcache-box'
# Not a secret worth the name: the box listens only on its own bridge, which
# only its namespaces reach; written to clouds.yaml as any DevStack does.
PASSWORD = 'fcache-box-secret'
DB_USER = 'box'

PORTS = {
    'mariadb': 13306,
    'rabbitmq': 15672,
    'keystone': 5000,
    'placement': 8778,
    'glance': 9292,
    'neutron': 9696,
    'nova-api': 8774,
    'cinder-api': 8776,
}

STRATEGIES = ('none', 'cachemior', 'firepan', 'firepan_if', 'cloudcache',
              'hybrid', 'auto')


class ComputeHost(object):
    """A compute host: a network namespace, libvirtd, agent, nova-compute."""

    def __init__(self, box, index):
        self.box = box
        self.letter = 'ab'[index]
        self.name = 'box-%s' % self.letter
        self.netns = 'fcbox-%s' % self.letter
        self.ip = '%s.%d' % (PREFIX, 11 + index)
        self.veth = 'vfcbox-%s' % self.letter
        self.dir = os.path.join(box.dir, 'hosts', self.name)
        self.run_dir = os.path.join(self.dir, 'run')
        self.instances = os.path.join(self.dir, 'instances')
        self.fcache_dir = os.path.join(self.dir, 'fcache')
        self.agent_conf = os.path.join(self.fcache_dir, 'agent.conf')
        self.agent_socket = os.path.join(self.fcache_dir, 'agent.sock')
        self.keyring_dir = os.path.join(self.fcache_dir, 'ceph')
        self.nova_conf = os.path.join(box.etc, 'nova', 'nova-%s.conf'
                                      % self.name)
        self.libvirt_socket = os.path.join(self.run_dir, 'libvirt-sock')
        # Caches of two sizes, as in a fleet bought over the years: a
        # volume whose cache fits only box-a's is refused a move to box-b.
        self.cache_size = ('256M', '160M')[index]

    @property
    def libvirt_uri(self):
        return 'qemu+unix:///system?socket=%s' % self.libvirt_socket


class Box(object):
    def __init__(self, directory):
        self.dir = os.path.abspath(directory)
        self.etc = os.path.join(self.dir, 'etc')
        self.logs = os.path.join(self.dir, 'logs')
        self.run = os.path.join(self.dir, 'run')
        self.data = os.path.join(self.dir, 'data')
        self.cache = os.path.join(self.dir, 'cache')
        self.ceph = os.path.join(self.dir, 'ceph')
        self.clouds_yaml = os.path.join(self.dir, 'clouds.yaml')
        # Every compute host's instances_path, as on a real cloud, where
        # the domain XML that live-migrates names it (console log, kernel):
        # each host's own directory is bind-mounted here in the mount
        # namespaces of its libvirtd and nova-compute.
        self.instances_mount = os.path.join(self.dir, 'instances')
        self.secrets = os.path.join(self.dir, 'secrets.json')
        self.hosts = [ComputeHost(self, i) for i in range(2)]

    def url(self, service, path=''):
        return 'http://%s:%d%s' % (CONTROLLER_IP, PORTS[service], path)

    def db_url(self, database):
        return 'mysql+pymysql://%s:%s@%s:%d/%s?charset=utf8' % (
            DB_USER, PASSWORD, CONTROLLER_IP, PORTS['mariadb'], database)

    @property
    def transport_url(self):
        return 'rabbit://%s:%s@%s:%d/' % (DB_USER, PASSWORD, CONTROLLER_IP,
                                          PORTS['rabbitmq'])

    def log(self, name):
        return os.path.join(self.logs, name + '.log')

    def makedirs(self):
        for d in (self.etc, self.logs, self.run, self.data, self.cache,
                  self.instances_mount):
            os.makedirs(d, exist_ok=True)
        for h in self.hosts:
            for d in (h.run_dir, h.instances, h.fcache_dir,
                      os.path.join(h.dir, 'log')):
                os.makedirs(d, exist_ok=True)
            os.makedirs(h.keyring_dir, mode=0o700, exist_ok=True)


VIRT_TYPES = ('qemu', 'kvm')


def virt_type():
    """Nova's [libvirt] virt_type: $FCACHE_BOX_VIRT_TYPE, default qemu.

    TCG (qemu) runs anywhere; kvm only where /dev/kvm boots standard
    kernels, which a nested or paravirtualised /dev/kvm may not: the box
    does not guess.
    """
    value = os.environ.get('FCACHE_BOX_VIRT_TYPE', 'qemu')
    if value not in VIRT_TYPES:
        raise ValueError('FCACHE_BOX_VIRT_TYPE=%s: use %s'
                         % (value, ' or '.join(VIRT_TYPES)))
    return value


def default_dir():
    return os.environ.get('FCACHE_BOX_DIR', '/var/tmp/fcache-box')
