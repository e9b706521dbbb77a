# SPDX-License-Identifier: Apache-2.0
"""The FirepanIF performance model, Eq. 1-3 (nova_ext.contention).

The paper works no example through its equations; the figures it
measures (4.2, 4.3.2) are checked where the model speaks to them.
"""

import itertools

import pytest

from nova_ext import contention

INF = contention.INF
rate = contention.vm_rate

# A node with a flash device shared by 4 VMs, a storage shared by 7 (the
# paper's 4 + 3), a link; the rates in IOPS, of the paper's order.
SHARED = dict(flash=200000, vms_on_flash=4, storage=100000, vms_on_storage=7,
              link=60000)


def test_eq1_alone_is_the_sum_of_the_two_streams():
    # 4.2: ~8K IOPS with no cache (S_k), a hit ratio of ~60 % once warm,
    # and then "more than 15K": Eq. 1 gives that for a partition of 20K.
    assert rate(0.0, 20000, 8000) == 8000
    assert rate(0.6, 20000, 8000) == pytest.approx(15200)


def test_no_copy_nothing_shared_is_the_uncontended_rate():
    for h in (0.0, 0.3, 1.0):
        assert rate(h, 20000, 8000, copy=0.0) == \
            pytest.approx(h * 20000 + (1 - h) * 8000)


def test_hit_ratio_0_is_storage_bound():
    # The flash, and a copy that only touches the flash, do not matter.
    expect = min(100000 / 7, 60000, 8000)
    for flash, copy in ((0, 0), (10 ** 6, 0), (10 ** 6, 10 ** 6)):
        assert rate(0.0, 20000, 8000, **dict(SHARED, flash=flash,
                                             link=INF, copy=copy)) == expect
    assert rate(0.0, 20000, 8000, **SHARED) == expect


def test_hit_ratio_1_is_flash_bound():
    # The storage and the link do not matter.
    expect = min(200000 / 4, 20000)
    for storage, link in ((0, 0), (10 ** 6, INF)):
        assert rate(1.0, 20000, 8000, **dict(SHARED, storage=storage,
                                             link=link)) == expect
    # A full device: the fair share is the limit.
    assert rate(1.0, 20000, 8000, flash=40000, vms_on_flash=4) == 10000


def test_rate_limited_copy_leaves_the_rest():
    # Copy 30 of a flash device of 100 the VM has alone: it gets 70.
    assert rate(1.0, INF, 0, flash=100, copy=30) == 70
    # The rest is shared: 4 VMs, 70 left.
    assert rate(1.0, INF, 0, flash=100, vms_on_flash=4, copy=30) == 17.5
    # The same on the link, for the VM's misses.
    assert rate(0.0, 0, INF, link=100, copy=30) == 70
    # A copy that fills a device leaves nothing, not less than nothing.
    assert rate(1.0, INF, 0, flash=100, copy=150) == 0
    # Where the VM's own partition is the limit, a small copy costs it
    # nothing: the device still has more than its share to give.
    assert rate(1.0, 20, 0, flash=100, copy=30) == 20


def test_a_partition_bound_vm_does_not_see_a_new_neighbour():
    # 4.3.2: the three VMs' rate "remains steady whether the target VM
    # shares the NVMe SSD or not", their partitions being the limit.
    three = rate(1.0, 15000, 0, flash=100000, vms_on_flash=3)
    four = rate(1.0, 15000, 0, flash=100000, vms_on_flash=4)
    assert three == four == 15000


def test_min_not_max_shared_is_never_faster_than_alone():
    for h in (0.0, 0.5, 1.0):
        alone = rate(h, 20000, 8000)
        assert rate(h, 20000, 8000, **SHARED) <= alone
        assert rate(h, 20000, 8000, **dict(SHARED, copy=5000)) <= alone
    # A storage shared enough is the limit: 7 VMs on 28K get 4K each.
    assert rate(0.0, 0, 8000, storage=28000, vms_on_storage=7) == 4000


GRID = dict(hit_ratio=(0.0, 0.4, 1.0), vm_flash=(1000, 30000),
            vm_storage=(1000, 9000), flash=(20000, INF),
            vms_on_flash=(1, 3), storage=(10000, INF),
            vms_on_storage=(1, 5), link=(5000, INF), copy=(0, 4000))
UP = ('vm_flash', 'vm_storage', 'flash', 'storage', 'link')
DOWN = ('vms_on_flash', 'vms_on_storage', 'copy')


def _points():
    keys = sorted(GRID)
    for vals in itertools.product(*(GRID[k] for k in keys)):
        yield dict(zip(keys, vals))


@pytest.mark.parametrize('name', UP + DOWN)
def test_monotone(name):
    sign = 1 if name in UP else -1
    for p in _points():
        lo = rate(**p)
        hi = rate(**dict(p, **{name: p[name] * 2 if p[name] else 1}))
        assert sign * (hi - lo) >= 0, (name, p)


def test_monotone_in_hit_ratio_when_the_cache_is_the_faster():
    # A hit moves a request from the storage's stream to the cache's: it
    # pays while the VM's partition of the cache gives more than its
    # partition of the storage and its share of the device is not full.
    # (Past that point the two streams of Eq. 2 predict less for more
    # hits: the hits are throttled, the misses they replaced are gone.)
    for p in _points():
        share = max(p['flash'] - p['copy'], 0) / p['vms_on_flash']
        if not p['vm_storage'] <= p['vm_flash'] <= share:
            continue
        rates = [rate(**dict(p, hit_ratio=h)) for h in (0, 0.25, 0.5, 1)]
        assert rates == sorted(rates), p


@pytest.mark.parametrize('kw', [dict(hit_ratio=1.5), dict(hit_ratio=-0.1),
                                dict(copy=-1), dict(vms_on_flash=0),
                                dict(vms_on_storage=0), dict(vm_storage=-1)])
def test_rejects_what_no_device_has(kw):
    args = dict(hit_ratio=0.5, vm_flash=1, vm_storage=1)
    args.update(kw)
    with pytest.raises(ValueError):
        rate(**args)
