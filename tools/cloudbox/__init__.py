# SPDX-License-Identifier: Apache-2.0
"""The cloud in a box: a small real OpenStack on one machine (tools/cloud.sh).

Keystone, Placement, Glance, Neutron (ML2, no agents: the servers have no
network), Nova (api, conductor, scheduler and two nova-compute services,
each beside its own libvirtd and fcache-agent in a network namespace of
its own), Cinder on a one-OSD Ceph cluster, RabbitMQ and MariaDB, all
from PyPI and Debian's packages, as a DevStack multinode job would set
them up, without the internet.  See doc/install/cloud-box.rst.
"""
