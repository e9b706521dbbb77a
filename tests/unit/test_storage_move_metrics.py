# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the storage-move benchmark's arithmetic.

bench/storage_move_metrics.py: the emulated media, the paper's lambdas
and MC (§4), auto's verdict against the measured best, and mixing
(§7.4).  Every expected figure is worked out by hand in the comments.
"""

import math

import pytest

from bench import storage_move_metrics as smm

MiB = 1 << 20


def test_media_follow_the_papers_ratios():
    # Table 1: 180/95 MB/s; Table 2: 5900/1744 IOPS.
    assert smm.PAPER_BANDWIDTH_RATIO == pytest.approx(1.894737, rel=1e-6)
    assert smm.PAPER_IOPS_RATIO == pytest.approx(3.383028, rel=1e-6)
    media = smm.emulated_media(50, 7)
    hdd, ssd = media['hdd'], media['ssd']
    # HDD: 4 KiB at 50 MB/s is 81.92 us, so 7.08192 ms a request.
    assert (hdd.mbps, hdd.delay_ms) == (50.0, 7)
    assert hdd.iops == pytest.approx(1 / 7.08192e-3)
    # SSD: 50 * 1.894737 = 94.7368 MB/s (4 KiB in 43.236 us); the ideal
    # request takes 7.08192 / 3.383028 = 2.09337 ms, a delay of 2.05013
    # ms, rounded to 2 ms: 2.043236 ms a request, 489.42 IOPS.
    assert ssd.mbps == pytest.approx(94.73684, rel=1e-6)
    assert ssd.delay_ms == 2
    assert ssd.iops == pytest.approx(489.42, abs=0.01)
    assert ssd.iops / hdd.iops == pytest.approx(3.466, abs=0.001)


@pytest.mark.parametrize('mbps,delay', [(50, 0), (0, 7), (50, 2.5),
                                        (50, 1)])
def test_media_refused(mbps, delay):
    # (50, 1): the HDD's 1.08192 ms over 3.383 is 0.31981 ms, less the
    # SSD's 0.04324 ms of bytes: 0.277 ms, which rounds to no delay.
    with pytest.raises(ValueError):
        smm.emulated_media(mbps, delay)


def test_copy_floor_is_the_slower_medium():
    media = smm.emulated_media(50, 7)
    # 64 MiB at 50 MB/s: 67108864 / 50e6 = 1.342177 s.
    for src, dst in (('hdd', 'ssd'), ('ssd', 'hdd'), ('hdd', 'hdd')):
        assert smm.copy_floor_s(64 * MiB, media, src, dst) == \
            pytest.approx(1.342177, rel=1e-6)
    # At 94.7368 MB/s: 0.708371 s.
    assert smm.copy_floor_s(64 * MiB, media, 'ssd', 'ssd') == \
        pytest.approx(0.708371, rel=1e-5)


def test_lambda_time_equation_2():
    assert smm.lambda_time(3.0, 1.5) == 2.0
    assert smm.lambda_time(None, 1.5) == math.inf   # did not finish
    with pytest.raises(ValueError):
        smm.lambda_time(3.0, 0)


def test_lambda_io_equation_1():
    # (1000 - 750) / 1000
    assert smm.lambda_io(750, 1000) == 0.25
    # Faster than the best medium alone (noise): no negative penalty.
    assert smm.lambda_io(1100, 1000) == 0.0
    with pytest.raises(ValueError):
        smm.lambda_io(10, 0)


@pytest.mark.parametrize('src,dst,expected', [
    # a wrote 100, b 1100, the image is 1000 bytes.
    ('ssd', 'hdd', 100),        # the SSD source's writes
    ('hdd', 'ssd', 100),        # the SSD destination's, less the copy
    ('ssd', 'ssd', 200),        # both
    ('hdd', 'hdd', 0),          # no SSD, no wear
])
def test_ssd_writes_are_table_6s_accounting(src, dst, expected):
    assert smm.ssd_workload_writes(src, dst, 100, 1100, 1000) == expected


def test_a_destination_below_one_copy_wears_nothing_more():
    # LR's copy skips what the VM wrote: B may get fewer bytes than the
    # image from the copy; those count as copy (§7.2), never negative.
    assert smm.ssd_workload_writes('hdd', 'ssd', 0, 900, 1000) == 0


def test_lambda_wear_equation_3():
    assert smm.lambda_wear(300, 600) == 0.5
    assert smm.lambda_wear(300, 0) == 0.0       # the VM wrote nothing


def test_cell_figures_by_hand():
    # SSD to HDD: 3 s against a 1.5 s copy (lambda_time 2); 600 of 800
    # B/s (lambda_io 0.25); 400 bytes on the SSD source of the VM's 800
    # (lambda_wear 0.5).  MC = 2 * (g * 0.5 + (1 - g) * 0.25):
    # g 0.1: 2 * 0.275 = 0.55; 0.5: 2 * 0.375 = 0.75; 0.8: 2 * 0.45 = 0.9.
    f = smm.cell_figures(3.0, 1.5, 600, 800, 'ssd', 'hdd', 400, 5000, 4096,
                         800)
    assert (f['lambda_time'], f['lambda_io'], f['lambda_wear']) == \
        (2.0, 0.25, 0.5)
    assert f['mc_0.1'] == pytest.approx(0.55)
    assert f['mc_0.5'] == pytest.approx(0.75)
    assert f['mc_0.8'] == pytest.approx(0.9)


def test_a_move_that_did_not_finish_costs_infinity():
    f = smm.cell_figures(None, 1.5, 600, 800, 'ssd', 'hdd', 400, 0, 4096,
                         800)
    assert f['lambda_time'] == math.inf
    assert f['lambda_io'] == 1.0
    assert all(f['mc_%g' % g] == math.inf for g in smm.GAMMAS)


@pytest.mark.parametrize('xs,expected', [
    ([3, 1, 2], 2), ([1, 2, None], 1.5), ([1, math.inf], math.inf),
    ([math.inf, math.inf, 1], math.inf), ([None], None), ([], None)])
def test_median(xs, expected):
    assert smm.median(xs) == expected


MEASURED = {'dbt': math.inf, 'mirror': 0.9, 'lr': 0.6, 'slr': 0.6,
            'aio': 1.2}
QEMU = {'qemu-bg': 0.7, 'qemu-wb': 2.0}


def test_auto_agrees_with_a_scheme_tied_for_best():
    v = smm.auto_verdict('slr', MEASURED, QEMU)
    assert v['best'] == ['lr', 'slr'] and v['best_mc'] == 0.6
    assert (v['agree'], v['verdict'], v['excess']) == (True, 'agree', 0.0)
    assert v['below_qemu'] is True      # 0.6 < 0.7 and < 2.0


def test_auto_fails_with_the_margin():
    # 1.2 against the best's 0.6: 100 % above.
    v = smm.auto_verdict('aio', MEASURED, QEMU)
    assert (v['agree'], v['verdict']) == (False, 'FAIL')
    assert v['excess'] == pytest.approx(1.0)
    assert v['auto_mc'] == 1.2
    assert v['below_qemu'] is False
    # mirror: 0.9 / 0.6 - 1 = 0.5, above qemu-bg's 0.7.
    v = smm.auto_verdict('mirror', MEASURED, QEMU)
    assert v['excess'] == pytest.approx(0.5)
    assert v['below_qemu'] is False


def test_auto_choosing_a_move_that_did_not_finish_fails():
    v = smm.auto_verdict('dbt', MEASURED, QEMU)
    assert v['verdict'] == 'FAIL' and v['excess'] == math.inf
    assert v['below_qemu'] is False


def test_auto_with_nothing_measured_fails():
    v = smm.auto_verdict('lr', dict.fromkeys(MEASURED))
    assert v['verdict'] == 'FAIL' and v['best'] == []


@pytest.mark.parametrize('volumes,eps,expected', [
    (4, 0.25, [('ssd', 'ssd'), ('hdd', 'hdd'), ('ssd', 'hdd'),
               ('hdd', 'ssd')]),
    (4, 0.0, [('ssd', 'hdd'), ('ssd', 'hdd'), ('hdd', 'ssd'),
              ('hdd', 'ssd')]),
    (4, 0.5, [('ssd', 'ssd'), ('ssd', 'ssd'), ('hdd', 'hdd'),
              ('hdd', 'hdd')]),
    # 8 * 0.125 = 1 of each same-media pair, (8 - 2) / 2 = 3 of each cross.
    (8, 0.125, [('ssd', 'ssd'), ('hdd', 'hdd')] + [('ssd', 'hdd')] * 3 +
     [('hdd', 'ssd')] * 3),
])
def test_batch_directions_are_section_7_4s(volumes, eps, expected):
    assert smm.batch_directions(volumes, eps) == expected


@pytest.mark.parametrize('volumes,eps', [(4, 0.6), (4, -0.1), (3, 0.25),
                                         (0, 0.25)])
def test_batch_directions_refused(volumes, eps):
    with pytest.raises(ValueError):
        smm.batch_directions(volumes, eps)


def test_batch_mc_is_the_sum():
    assert smm.batch_mc([0.5, 0.25, 0.125]) == 0.875
    assert smm.batch_mc([0.5, math.inf]) == math.inf


def test_mixing_verdict_by_hand():
    single = {'lr': 4.0, 'slr': 5.0, 'aio': 2.5}
    # 1 - 1.3 / 2.5 = 0.48: the paper's cut, against AIO.
    v = smm.mixing_verdict(single, 1.3)
    assert v['best_single'] == 'aio' and v['best_single_mc'] == 2.5
    assert v['cut'] == pytest.approx(0.48)
    assert v['never_worse'] is True
    # 1 - 3.0 / 2.5 = -0.2: the mix cost more.
    v = smm.mixing_verdict(single, 3.0)
    assert v['cut'] == pytest.approx(-0.2)
    assert v['never_worse'] is False
    # A best single scheme with no cost leaves no cut to give.
    assert smm.mixing_verdict({'lr': 0.0, 'aio': 1.0}, 0.0)['cut'] is None


def test_mixing_claims():
    rows = [smm.mixing_verdict({'lr': 4.0, 'aio': 2.5}, 1.3),
            smm.mixing_verdict({'lr': 4.0, 'aio': 2.5}, 2.4)]
    c = smm.mixing_claims(rows)
    assert c['never_worse'] is True
    assert c['largest_cut'] == pytest.approx(0.48)
    assert c['cut_48'] is True
    # Cuts of 4 % and -20 %: never worse fails, and so does the 48 %.
    rows = [smm.mixing_verdict({'lr': 4.0, 'aio': 2.5}, 2.4),
            smm.mixing_verdict({'lr': 4.0, 'aio': 2.5}, 3.0)]
    c = smm.mixing_claims(rows)
    assert (c['never_worse'], c['cut_48']) == (False, False)
    assert c['largest_cut'] == pytest.approx(0.04)
    assert smm.mixing_claims([])['never_worse'] is False


def test_against_the_paper_leaves_out_what_it_leaves_out():
    # SSD to HDD, gamma 0.1: the paper has AIO, and excludes DBT.
    v = smm.against_paper('ssd->hdd', 'mc_0.1',
                          {'dbt': 0.1, 'aio': 0.3, 'slr': 0.5, 'lr': 2.0,
                           'mirror': 0.4})
    assert v == {'paper': ('aio',), 'measured': ('aio',), 'agree': True}
    v = smm.against_paper('hdd->ssd', 'lambda_time',
                          {'dbt': 3.0, 'lr': 2.0, 'slr': 1.5})
    assert v['measured'] == ('slr',) and v['agree'] is False


def test_mean():
    assert smm.mean([1.0, 2.0, None]) == 1.5
    assert smm.mean([1.0, math.inf]) == math.inf
    assert smm.mean([None]) is None


def test_the_paper_table_covers_every_direction_and_gamma():
    for d, figs in smm.PAPER_BEST.items():
        assert set(figs) == {'lambda_time', 'lambda_io'} | set(
            'mc_%g' % g for g in smm.GAMMAS), d
    assert set(smm.PAPER_BEST) == set(smm.PAPER_DOWNTIME_MS)


T = '2026-11-29 06:16:22.3489 '
LOG = ''.join(T + line + '\n' for line in (
    'connection=1 Connect export=v1 tls=0 size=0x400000',
    'connection=2 Connect export=v2 tls=0 size=0x400000',
    'connection=1 Write id=1 offset=0x0 count=0x1000 fua=0 ...',
    'connection=1 ...Write id=1 return=0',
    'connection=2 Zero id=1 offset=0x0 count=0x10000 fua=0 may_trim=1 ...',
    'connection=2 Read id=2 offset=0x0 count=0x100000 ...',
    'connection=2 Trim id=3 offset=0x0 count=0x100000 fua=0 ...',
    'connection=3 Connect export=v1 tls=0 size=0x400000',
    'connection=3 Write id=1 offset=0x2000 count=0x200 fua=0 ...'))


def test_nbdkit_log_gives_each_exports_writes(tmp_path):
    from bench import storage_move as sm
    path = tmp_path / 'log'
    path.write_text(LOG)
    # v1: 0x1000 + 0x200 (two connections) = 4608; v2: a 64 KiB zero.
    # Reads and trims write nothing; the return lines count once.
    assert sm.parse_nbdkit_log(str(path)) == {'v1': 4608, 'v2': 65536}


def test_qemu_nbd_node_names_the_export():
    from bench import storage_move as sm
    assert sm.nbd_node('nbd+unix:///v3?socket=/tmp/x/s.sock') == \
        'server.type=unix,server.path=/tmp/x/s.sock,export=v3'
    assert sm.nbd_node('nbd+unix:///?socket=/tmp/x/s.sock') == \
        'server.type=unix,server.path=/tmp/x/s.sock'
