# SPDX-License-Identifier: Apache-2.0
"""The box's network: a bridge on the machine, a namespace per compute.

The control plane listens on the bridge's address, which only the box's
own namespaces reach; each compute host's libvirtd, fcache-agent and
nova-compute run in its namespace with its own address, so a live
migration crosses a link, as between two machines.
"""

import subprocess

from cloudbox import layout
from cloudbox import procs


def _ip(*args, check=True):
    proc = subprocess.run(('ip',) + args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise procs.BoxError('ip %s: %s'
                             % (' '.join(args), proc.stderr.strip()))
    return proc.returncode == 0


def _exists(dev):
    return _ip('link', 'show', dev, check=False)


def _netns_exists(ns):
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                         text=True).stdout
    return any(line.split()[0] == ns for line in out.splitlines() if line)


def up(box):
    addr = '%s/%d' % (layout.CONTROLLER_IP, layout.NETMASK)
    if not _exists(layout.BRIDGE):
        _ip('link', 'add', layout.BRIDGE, 'type', 'bridge')
        _ip('addr', 'add', addr, 'dev', layout.BRIDGE)
    _ip('link', 'set', layout.BRIDGE, 'up')
    for h in box.hosts:
        if not _netns_exists(h.netns):
            _ip('netns', 'add', h.netns)
        _ip('-n', h.netns, 'link', 'set', 'lo', 'up')
        if not _ip('-n', h.netns, 'link', 'show', 'eth0', check=False):
            if _exists(h.veth):
                _ip('link', 'delete', h.veth)
            _ip('link', 'add', h.veth, 'type', 'veth', 'peer', 'name',
                'eth0', 'netns', h.netns)
            _ip('-n', h.netns, 'addr', 'add',
                '%s/%d' % (h.ip, layout.NETMASK), 'dev', 'eth0')
        _ip('link', 'set', h.veth, 'master', layout.BRIDGE, 'up')
        _ip('-n', h.netns, 'link', 'set', 'eth0', 'up')


def down(box):
    for h in box.hosts:
        if _netns_exists(h.netns):
            _ip('netns', 'delete', h.netns, check=False)
        if _exists(h.veth):
            _ip('link', 'delete', h.veth, check=False)
    if _exists(layout.BRIDGE):
        _ip('link', 'delete', layout.BRIDGE, check=False)


def status(box):
    lines = ['bridge %s %s: %s' % (layout.BRIDGE, layout.CONTROLLER_IP,
                                   'up' if _exists(layout.BRIDGE) else
                                   'absent')]
    for h in box.hosts:
        lines.append('netns %s %s: %s' % (h.netns, h.ip,
                                          'present' if _netns_exists(h.netns)
                                          else 'absent'))
    return lines
