# SPDX-License-Identifier: Apache-2.0
"""The FirepanIF performance model: a VM's rate while a cache copy runs.

The FirepanIF paper (seed ``firepanif-cache-warmup``, 4.3.1, Equations
1-3) gives the I/O rate of VM ``k`` on node ``i`` as a cache part plus a
shared-storage part::

    (1)  IOPS_k = H_k F_k + (1 - H_k) S_k
    (2)  IOPS_k = min(F_i / E_i, H_k F_k) + min(S / sum(E), (1 - H_k) S_k)
    (3)  IOPS_k = min(F_i / E_i, H_k F_k)
                  + min(S / sum(E), N_i / B_i, (1 - H_k) S_k)

``H_k``  the VM's cache hit ratio (``hit_ratio``)
``F_k``  the most its cache partition gives it: the paper gives each VM a
         partition of the flash device, which alone cannot use the
         device's internal parallelism (``vm_flash``)
``S_k``  the most its partition of the shared storage gives it
         (``vm_storage``)
``F_i``  the most the node's flash device gives all its VMs (``flash``)
``E_i``  VMs on the node, sharing ``F_i`` fairly (``vms_on_flash``)
``S``    the most the shared storage gives all VMs (``storage``)
``sum(E)`` VMs on all the nodes, sharing ``S`` fairly
         (``vms_on_storage``)
``N_i / B_i`` the node's network to the storage in bytes/s over the mean
         request size: the network as a rate of requests (``link``, here
         in the unit of the other rates)

The paper prints ``max`` in (2) and (3), but its text means a throttle:
"when the overall performance provided by all the partitions exceeds the
maximum performance of the device, the storage performance will be
throttled down", and "the network bandwidth ... can throttle the storage
performance".  A VM cannot get more than its partition gives it, nor more
than its fair share of a device that is full, nor more than the network
carries: each part is the least of its limits, ``min``.  With ``max`` a
VM would never run slower shared than alone (Eq. 1) and could run faster
than its own partition allows, against the paper's 4.3.2: the neighbours
on the source ran at about 15K IOPS with four VMs there and 20K with
three.  As in the paper, ``N_i`` is not divided among the node's VMs.

The copy: the paper explains FirepanIF's dip during its copy by "flash
cache migration requires additional bandwidth for the network and
host-side flash cache".  A copy of ``copy`` per second is taken off the
flash device before the VMs share what is left, and off the network: a
rate-limited copy leaves the rest.  A preload from the shared storage
(Cachemior's warmer: "the FIO and warm-up thread compete for the shared
storage") is one more sharer of ``S``: count it in ``vms_on_storage``.

Rates are per second in any one unit, the same for every argument (IOPS,
or bytes/s as fcache's cost model and testbed use); unlimited is
``float('inf')``.  Equation (1) is the sum of two streams, each at its
own device's rate (not the harmonic mix of one queue): the paper's model,
kept as it is.
"""

INF = float('inf')


def vm_rate(hit_ratio, vm_flash, vm_storage, flash=INF, vms_on_flash=1,
            storage=INF, vms_on_storage=1, link=INF, copy=0.0):
    """A VM's rate by Eq. 3, with a copy of ``copy`` per second running.

    With the defaults it is Eq. 1 (nothing shared), with ``link`` left
    unlimited Eq. 2.  See the module's docstring for each symbol.
    """
    if not 0.0 <= hit_ratio <= 1.0:
        raise ValueError('hit ratio %r is not within [0, 1]' % hit_ratio)
    if min(vm_flash, vm_storage, flash, storage, link, copy) < 0:
        raise ValueError('a rate is negative')
    if vms_on_flash < 1 or vms_on_storage < 1:
        raise ValueError('a device is shared by fewer than one VM')
    flash_part = min(max(flash - copy, 0.0) / vms_on_flash,
                     _times(hit_ratio, vm_flash))
    storage_part = min(storage / vms_on_storage, max(link - copy, 0.0),
                       _times(1.0 - hit_ratio, vm_storage))
    return flash_part + storage_part


def _times(share, rate):
    # 0 x unlimited is 0: a VM that never hits its cache gets nothing
    # from it however fast the cache.
    return share * rate if share else 0.0
