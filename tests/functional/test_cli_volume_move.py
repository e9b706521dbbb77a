# SPDX-License-Identifier: Apache-2.0
"""``fcache volume-move*`` against the real agent, as a subprocess.

The commands' parsing and rendering are unit-tested against JSON fixtures
(tests/unit/test_cli_storage_move.py); here they drive the agent's real
volume-move, volume-move-status and volume-move-abort between two nbdkit
origins, so that what the commands send and read is the agent's contract.
"""

import json

from fcache_testkit import oracle as om

from . import test_cli

MiB = 1 << 20
SIZE = 4 * MiB


def attach(agent, volume_id, origin):
    res = agent.client().call('volume-attach', volume_id=volume_id,
                              origin=origin.uri, cache_size=MiB,
                              write_policy='write_through')
    return res['export_uri']


def test_move_auto_wait_json_lines_and_measured_cost(make_agent,
                                                     make_origin):
    agent = make_agent(cache_size='8M').start()
    sock = agent.control_socket
    a = make_origin(SIZE, name='A')
    b = make_origin(SIZE, name='B', seed=99)
    export = attach(agent, 'vol1', a)
    h = om.connect(export)
    h.pwrite(b'\x5a' * MiB, 0)
    h.flush()
    rc, out, err = test_cli.run(
        ['--socket', sock, 'volume-move', 'vol1', '--to', b.uri,
         '--scheme', 'auto', '--from-medium', 'hdd', '--to-medium', 'ssd',
         '--wait', '--interval', '0.05', '--json'])
    assert (rc, err) == (0, ''), (rc, out, err)
    lines = [json.loads(line) for line in out.splitlines()]
    # One status per poll, then the result: the last status and auto.
    final = lines[-1]
    assert final['state'] == 'done'
    assert final['scheme'] == 'lr' == final['auto']['chosen']
    assert all(line['volume_id'] == 'vol1' for line in lines)
    assert lines[-2]['state'] == 'done'
    assert final['bytes_total'] == SIZE
    h.pwrite(b'\xa5' * MiB, MiB)
    h.flush()
    h.shutdown()
    expected = b'\x5a' * MiB + b'\xa5' * MiB + bytes(a.content[2 * MiB:])
    assert b.read_file() == expected
    show = agent.client().call('volume-show', volume_id='vol1')
    assert show['move']['state'] == 'done'

    # The measured cost of the move just done, from the agent's status.
    cost = test_cli.ok_json(
        ['--socket', sock, 'volume-move-status', 'vol1',
         '--baseline-copy-s', '0.5', '--from-medium', 'hdd',
         '--to-medium', 'ssd', '--wear-weight', '0.5', '--json'])['cost']
    assert cost['scheme'] == 'lr'
    assert cost['lambda_time'] == final['elapsed_s'] / 0.5
    # The VM wrote nothing during the move: no workload write reached
    # the SSD.
    assert cost['lambda_wear'] == 0
    assert cost['lambda_io'] is None and cost['mc'] is None


def test_move_abort_and_timeout(make_agent, make_origin):
    agent = make_agent(cache_size='8M').start()
    sock = agent.control_socket
    a = make_origin(SIZE, name='A')
    b = make_origin(SIZE, name='B')
    attach(agent, 'vol2', a)
    # 4 MiB at 1 MB/s: about 4 s, longer than the --timeout below.
    rc, out, err = test_cli.run(
        ['--socket', sock, 'volume-move', 'vol2', '--to', b.uri,
         '--scheme', 'slr', '--rate-limit', '1', '--wait', '--timeout',
         '0.3', '--interval', '0.05'])
    assert rc == 1, (rc, out, err)
    assert 'still copying after 0.3 s' in err
    assert 'fcache volume-move-abort vol2' in err
    status = test_cli.ok_json(['--socket', sock, 'volume-move-status',
                               'vol2', '--json'])
    assert status['state'] == 'copying'
    rc, out, err = test_cli.run(['--socket', sock, 'volume-move-abort',
                                 'vol2'])
    assert (rc, err) == (0, ''), (rc, out, err)
    assert out.startswith('storage move of volume vol2 aborted')
    status = test_cli.ok_json(['--socket', sock, 'volume-move-status',
                               'vol2', '--json'])
    assert status['state'] == 'aborted'
    show = agent.client().call('volume-show', volume_id='vol2')
    assert show['origin'] == a.uri


def test_move_refused_by_the_agent(make_agent, make_origin):
    agent = make_agent(cache_size='8M').start()
    a = make_origin(SIZE, name='A')
    small = make_origin(MiB, name='small')
    attach(agent, 'vol3', a)
    # The new origin must hold the volume: the agent says so, one line.
    test_cli.fails(['--socket', agent.control_socket, 'volume-move', 'vol3',
                    '--to', small.uri, '--scheme', 'lr'], 1, 'agent errno')
