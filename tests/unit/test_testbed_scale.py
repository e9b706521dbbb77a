# SPDX-License-Identifier: Apache-2.0
"""tools/testbed.py --scale: the demo at 4x and 16x (doc/research/testbed.rst).

Parsing only: what each scale sets, that explicit options win, and the
refusals.  The runs themselves are the benchmark's (doc/results/).
"""

import pytest

from tests.unit import tool_module

TB = tool_module.load('testbed_cli', 'testbed.py')
MiB = 1 << 20


def test_scale_1_is_the_demo():
    _, demo = TB.parse_args(['--quick'])
    _, one = TB.parse_args(['--quick', '--scale', '1'])
    assert vars(one) == vars(demo)


@pytest.mark.parametrize('scale, job, cache, rate, link, warm, first, total', [
    (4, 32, 64, '64M', 40.0, 20.0, 10.0, 20.0),
    (16, 128, 256, '128M', 80.0, 40.0, 20.0, 40.0),
])
def test_scale_sets_the_working_set_cache_storage_link_and_windows(
        scale, job, cache, rate, link, warm, first, total):
    _, demo = TB.parse_args(['--quick'])
    _, cfg = TB.parse_args(['--quick', '--scale', str(scale)])
    # The working set is four job regions: 4x and 16x the demo's.
    assert cfg.job_size == job * MiB == scale * demo.job_size
    assert cfg.cache_sizes == (cache * MiB,)
    assert cfg.cache_sizes[0] == scale * demo.cache_sizes[0]
    assert (cfg.storage_rate, cfg.link_mbps) == (rate, link)
    assert (cfg.warm_s, cfg.first_s, cfg.total_s) == (warm, first, total)
    # The cache still fits the disk, and the preset's runs stay.
    assert cfg.cache_sizes[0] <= cfg.disk_size
    assert cfg.runs == demo.runs


def test_explicit_options_win_over_the_scale():
    _, cfg = TB.parse_args(['--scale', '4', '--link-mbps', '80',
                            '--runs', '3', '--strategies', 'none,hybrid'])
    assert cfg.link_mbps == 80.0
    assert cfg.runs == 3
    assert cfg.strategies == ('none', 'hybrid')
    assert cfg.job_size == 32 * MiB


@pytest.mark.parametrize('argv, message', [
    (['--smoke', '--scale', '4'], '--scale applies to the demo'),
    (['--scale', '8'], 'invalid choice'),
])
def test_scale_refusals(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        TB.parse_args(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err
