# SPDX-License-Identifier: Apache-2.0
"""From what the agents and Nova say to the balancer's model."""

from nova_ext.balancer import model


def build(loads, servers, enabled=None, exclude=()):
    """Return ``(hosts, vms)`` for :mod:`nova_ext.balancer.decision`.

    :param loads: ``{host: HostLoad}`` from a source.
    :param servers: :class:`nova_ext.balancer.nova.Server` list.
    :param enabled: ``{host: bool}`` of Nova's computes, or None: a host
        Nova does not list as enabled and up receives no VM.
    :param exclude: hosts that receive no VM (being evacuated).

    A VM's volumes are the Cinder volumes Nova lists for it that the agent
    of its host caches (the fcache volume id is the Cinder volume id).  A
    cached volume that no server of the host has attached still takes
    cache: it is counted as a VM that never moves (``volume:ID``).
    """
    hosts = []
    for name in sorted(loads):
        accepts = name not in exclude and (enabled is None or
                                           bool(enabled.get(name)))
        hosts.append(model.Host(name, loads[name].capacity_bytes,
                                accepts=accepts))
    vms = []
    claimed = set()
    for server in sorted(servers, key=lambda s: s.id):
        load = loads.get(server.host)
        volumes = []
        if load is not None:
            volumes = [load.volumes[v] for v in server.volume_ids
                       if v in load.volumes]
            claimed.update((server.host, v.id) for v in volumes)
        vms.append(model.Vm(server.id, server.host, volumes=volumes,
                            migrating=server.migrating, name=server.name))
    for name in sorted(loads):
        for vid, vol in sorted(loads[name].volumes.items()):
            if (name, vid) not in claimed:
                vms.append(model.Vm('volume:%s' % vid, name,
                                    volumes=[vol], migrating=True))
    return hosts, vms
