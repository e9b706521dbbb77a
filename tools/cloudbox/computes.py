# SPDX-License-Identifier: Apache-2.0
"""A compute host of the box: libvirtd, fcache-agent and nova-compute in
the host's network namespace.

libvirtd also gets a mount namespace in which the host's own directories
are mounted over /etc/libvirt, /var/lib/libvirt, /var/log/libvirt,
/var/cache/libvirt and a tmpfs over /run/libvirt (as tests/real_libvirt
does): its own configuration, domains, logs and host UUID.  It listens on
TCP on the host's address for the peer's live migrations (Nova's
``live_migration_uri`` qemu+tcp://%s/system) and on a unix socket in the
host's directory, which nova-compute uses.  Two settings differ from
Debian's, for reasons of this machine: no virtlogd runs
(``stdio_handler = "file"``) and no cgroup delegation exists
(``cgroup_controllers = []``).
"""

import os
import shutil
import uuid

from cloudbox import configs
from cloudbox import infra
from cloudbox import layout
from cloudbox import procs
from cloudbox import services

LIBVIRTD_CONF = """\
listen_tls = 0
listen_tcp = 1
listen_addr = "{addr}"
auth_tcp = "none"
auth_unix_rw = "none"
unix_sock_dir = "{run}"
unix_sock_rw_perms = "0700"
host_uuid = "{uuid}"
log_outputs = "3:file:{log}/libvirtd.log"
"""

QEMU_CONF = """\
stdio_handler = "file"
cgroup_controllers = [ ]
"""

MOUNTS = ('/etc/libvirt', '/var/lib/libvirt', '/var/log/libvirt',
          '/var/cache/libvirt')

SECRET_XML = """\
<secret ephemeral='no' private='no'>
  <uuid>{uuid}</uuid>
  <usage type='ceph'><name>client.cinder secret</name></usage>
</secret>
"""


def _daemon(host, what):
    return '%s-%s' % (what, host.name)


def start_libvirtd(box, host):
    sub = {m: os.path.join(host.dir, m.strip('/').replace('/', '_'))
           for m in MOUNTS}
    fresh = not os.path.exists(sub['/etc/libvirt'])
    for path in sub.values():
        os.makedirs(path, exist_ok=True)
    if fresh:
        shutil.copytree('/etc/libvirt', sub['/etc/libvirt'],
                        dirs_exist_ok=True)
    uuid_file = os.path.join(host.dir, 'host-uuid')
    if not os.path.exists(uuid_file):
        with open(uuid_file, 'w') as f:
            f.write(str(uuid.uuid4()))
    with open(uuid_file) as f:
        host_uuid = f.read().strip()
    log_dir = os.path.join(host.dir, 'log')
    with open(os.path.join(sub['/etc/libvirt'], 'libvirtd.conf'), 'w') as f:
        f.write(LIBVIRTD_CONF.format(addr=host.ip, run=host.run_dir,
                                     uuid=host_uuid, log=log_dir))
    with open(os.path.join(sub['/etc/libvirt'], 'qemu.conf'), 'w') as f:
        f.write(QEMU_CONF)
    # Its own UTS namespace too: libvirt reports the host name Nova keys
    # the compute node (and Placement its provider) by.
    script = ['set -e', 'hostname %s' % host.name, 'mkdir -p /run/libvirt',
              'mount -t tmpfs tmpfs /run/libvirt']
    script += ['mount --bind %s %s' % (sub[m], m) for m in MOUNTS]
    script.append('mount --bind %s %s' % (host.instances, box.instances_mount))
    script.append('exec libvirtd --listen -f /etc/libvirt/libvirtd.conf '
                  '-p %s/libvirtd.pid' % host.run_dir)
    procs.start(box, _daemon(host, 'libvirtd'),
                ['unshare', '-m', '-u', '--propagation', 'private', 'sh', '-c',
                 '\n'.join(script)], netns=host.netns)
    procs.wait_for(lambda: virsh(host, 'version'), 30, 'libvirtd of %s'
                   % host.name, box, _daemon(host, 'libvirtd'))


def virsh(host, *args):
    return procs.run(['virsh', '-c', host.libvirt_uri] + list(args),
                     'virsh %s on %s' % (args[0], host.name))


def define_secret(box, host, secret_uuid):
    """The cinder user's cephx key as the libvirt secret Nova names."""
    path = os.path.join(host.dir, 'secret.xml')
    with open(path, 'w') as f:
        f.write(SECRET_XML.format(uuid=secret_uuid))
    virsh(host, 'secret-define', path)
    key_file = os.path.join(host.dir, 'secret.key')
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(infra.ceph_key(box, 'cinder'))
    try:
        # The file holds the key as Ceph prints it, base64: libvirt
        # stores the bytes it encodes, which is what QEMU and Nova expect.
        virsh(host, 'secret-set-value', secret_uuid, '--file', key_file)
    finally:
        os.unlink(key_file)


def start_agent(box, host):
    configs.agent(box, host)
    name = _daemon(host, 'fcache-agent')
    procs.start(box, name, [layout.AGENT_BIN, '--config', host.agent_conf],
                netns=host.netns)
    procs.wait_for(lambda: os.path.exists(host.agent_socket), 30,
                   "the agent's control socket %s" % host.agent_socket,
                   box, name)


def start_nova_compute(box, host):
    os.makedirs(os.path.join(host.dir, 'nova', 'locks'), exist_ok=True)
    # In a mount namespace of its own, where instances_path is this
    # host's directory, as its libvirtd sees it.
    script = ['set -e',
              'mount --bind %s %s' % (host.instances, box.instances_mount),
              'exec %s --config-file %s --config-file %s' % (
                  os.path.join(layout.VENV_BIN, 'nova-compute'),
                  os.path.join(box.etc, 'nova', 'nova.conf'),
                  host.nova_conf)]
    procs.start(box, _daemon(host, 'nova-compute'),
                ['unshare', '-m', '--propagation', 'private', 'sh', '-c',
                 '\n'.join(script)],
                env=services.env(box), netns=host.netns)


def destroy_domains(host):
    try:
        names = virsh(host, 'list', '--all', '--name').split()
    except procs.BoxError:
        return
    for name in names:
        for cmd in ('destroy', 'undefine'):
            try:
                virsh(host, cmd, name)
            except procs.BoxError:
                pass


def daemons(host):
    return [_daemon(host, d) for d in ('nova-compute', 'fcache-agent',
                                       'libvirtd')]
