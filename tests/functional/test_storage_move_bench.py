# SPDX-License-Identifier: Apache-2.0
"""The storage-move benchmark, CI-sized (bench/storage_move.py --smoke).

One run of every system in every direction with one Table 7 workload on
a 16 MiB image, and one mixing batch of four 8 MiB volumes, against the
ASan agent.  What is checked is the benchmark's shape, not its figures
(those need an idle machine, bench/run-storage-move.sh): every output is
written and well-formed, no cell is dropped (a timed-out move is
reported as such), every completed move is no faster than the plain copy
of its image on its media (lambda_time >= 1, the paper's definition),
every cell of ``auto`` against the measured best has a verdict, and the
mixing table and the verdicts on the paper's mixing claims are there.
"""

import json
import math
import os

import docutils.core
import docutils.utils
import pytest

from bench import storage_move as sm
from bench import storage_move_metrics as smm
from tools.fcdemo import lab as fclab

EXPECTED_FILES = ('.json', '.txt', '.rst.txt', '.png', '-mixing.png')
# The run itself takes about 80 s on an idle 2-core machine; CI's load
# can triple it.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope='module')
def smoke(agent_binary, tmp_path_factory):
    out = str(tmp_path_factory.mktemp('smbench') / 'storage-move.json')
    saved = fclab.AGENT_BIN
    fclab.AGENT_BIN = agent_binary
    try:
        assert sm.main(['--smoke', '--out', out]) == 0
    finally:
        fclab.AGENT_BIN = saved
    with open(out) as f:
        res = json.load(f)
    return res, os.path.splitext(out)[0]


def _cells(res):
    a = res['analysis']
    for d in sm.TABLE_ORDER:
        for prof in res['params']['profiles']:
            for system in sm.SYSTEMS:
                yield d, prof, system, a['cells'][d][prof][system]


def test_outputs_exist_and_are_well_formed(smoke):
    res, base = smoke
    for ext in EXPECTED_FILES:
        path = base + ext
        assert os.path.getsize(path) > 0, path
    for ext in ('.png', '-mixing.png'):
        with open(base + ext, 'rb') as f:
            assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    # The tables are included in the docs, built with -W: they must be
    # reStructuredText without a warning.
    with open(base + '.rst.txt') as f:
        text = f.read()
    docutils.core.publish_doctree(text, settings_overrides={
        'halt_level': docutils.utils.Reporter.WARNING_LEVEL,
        'report_level': docutils.utils.Reporter.WARNING_LEVEL})
    assert res['params']['runs'] == 1
    assert res['params']['profiles'] == ['IOM_4']
    assert len(res['runs']) == 1


def test_no_cell_is_dropped_and_each_has_an_outcome(smoke):
    res, _ = smoke
    run = res['runs'][0]
    for d, prof, system, cell in _cells(res):
        raw = run['moves'][d][prof][system]
        assert raw['outcome'] in (sm.DONE, sm.FAILED, sm.TIMEOUT), raw
        if raw['outcome'] == sm.TIMEOUT:
            # Reported with what it cost, not left out.
            assert math.isinf(cell['lambda_time']), cell
            assert 'timed out' in raw['error'], raw
            assert raw['move_s'] >= res['params']['timeout_s'] - 0.5, raw
    done = [c for _, _, _, c in _cells(res) if c['status'] == sm.DONE]
    # Most moves finish on these media; a run where none did measured
    # nothing.
    assert len(done) >= len(sm.SYSTEMS) * 2, len(done)


def test_completed_moves_are_no_faster_than_the_plain_copy(smoke):
    res, _ = smoke
    a = res['analysis']
    for d, plain in a['plain_copy_s'].items():
        assert plain > 0, (d, plain)
    for d, prof, system, cell in _cells(res):
        if cell['status'] == sm.DONE:
            assert cell['lambda_time'] >= 1.0, (d, prof, system, cell)
            assert 0.0 <= cell['lambda_io'] <= 1.0, cell
            assert cell['lambda_wear'] >= 0.0, cell
    assert a['below_one'] == []
    with open(smoke[1] + '.txt') as f:
        assert 'every completed cell has lambda_time >= 1' in f.read()


def test_every_cell_of_auto_has_a_verdict(smoke):
    res, base = smoke
    auto = res['analysis']['auto']
    keys = set((v['direction'], v['profile'], v['gamma']) for v in auto)
    assert keys == set((d, p, g) for d in sm.TABLE_ORDER
                       for p in res['params']['profiles']
                       for g in smm.GAMMAS)
    assert len(auto) == len(keys)
    for v in auto:
        assert v['auto'] in sm.FC_SCHEMES, v
        assert v['verdict'] in ('agree', 'FAIL'), v
        assert v['agree'] == (v['verdict'] == 'agree'), v
        # A failing cell carries the measured costs of every system.
        assert set(v['measured']) == set(sm.SYSTEMS), v
        if v['agree']:
            assert v['auto'] in v['best'], v
    with open(base + '.txt') as f:
        text = f.read()
    assert 'auto against the best measured scheme' in text
    assert 'auto agrees with the measured best in' in text
    paper = res['analysis']['paper']
    assert len(paper) == 4 * (2 + len(smm.GAMMAS))
    assert all(isinstance(r['agree'], bool) for r in paper)


def test_the_mixing_table_is_there(smoke):
    res, base = smoke
    m = res['analysis']['mixing']
    assert len(m['rows']) == len(res['params']['mix_eps']) * len(
        smm.GAMMAS)
    for r in m['rows']:
        assert set(r['single']) == set(smm.MIX_SCHEMES), r
        assert len(r['assignment']) == res['params']['mix_volumes'], r
        assert all(x[2] in smm.MIX_SCHEMES for x in r['assignment']), r
        assert isinstance(r['never_worse'], bool), r
        assert r['mix_mc'] >= 0, r
    assert set(m['claims']) == {'never_worse', 'largest_cut', 'cut_48'}
    with open(base + '.txt') as f:
        text = f.read()
    assert 'Mixing (section 7.4)' in text
    assert "The paper's mixing claims" in text
    line = [x for x in text.splitlines() if 'cuts MC by up to 48 %' in x]
    assert len(line) == 1 and line[0].split()[-1] in ('holds', 'FAILS')
