# SPDX-License-Identifier: Apache-2.0
"""The ``fcache`` command line against the real agent, as a subprocess."""

import json
import os
import re
import subprocess

from nova_ext import exception

from fcache_testkit import migration_util as mu
from fcache_testkit import oracle as om

MiB = 1 << 20


def run(args, env=None, timeout=60):
    full_env = dict(os.environ)
    full_env.pop('FCACHE_SOCKET', None)
    if env:
        full_env.update(env)
    r = subprocess.run(mu.fcache_argv() + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout, env=full_env)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


def ok_json(args, **kw):
    rc, out, err = run(args, **kw)
    assert rc == 0, (args, rc, out, err)
    assert err == '', err
    return json.loads(out)


def fails(args, status, *words, **kw):
    rc, out, err = run(args, **kw)
    assert rc == status, (args, rc, out, err)
    assert out == ''
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith('\n'), err
    assert lines[0].startswith('fcache: error: '), err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_cli_end_to_end(make_agent, make_origin):
    agent = make_agent(cache_size='8M').start()
    sock = agent.control_socket
    origin = make_origin(4 * MiB)

    st = ok_json(['--socket', sock, 'agent-status', '--json'])
    for k in ('version', 'engine', 'capacity_bytes', 'used_bytes', 'volumes'):
        assert k in st, st
    assert st['engine'] == 'ucache' and st['capacity_bytes'] == 8 * MiB
    assert st['volumes'] == []
    # Options after the command, and the socket from the environment.
    assert ok_json(['agent-status', '--socket', sock, '--json']) == st
    assert ok_json(['agent-status', '--json'],
                   env={'FCACHE_SOCKET': sock}) == st
    rc, out, err = run(['--socket', sock, 'agent-status'])
    assert rc == 0 and 'ucache' in out and err == ''

    res = ok_json(['--socket', sock, 'volume-attach', 'cli-vol', '--origin',
                   origin.uri, '--cache-size', '1M', '--write-policy',
                   'write_back', '--admission', 'all', '--json'])
    assert res['volume_id'] == 'cli-vol'
    assert re.match(r'nbd\+unix:///[0-9a-f]{32}\?socket=/',
                    res['export_uri']), res
    # Attaching again with the same parameters is idempotent.
    again = ok_json(['--socket', sock, 'volume-attach', 'cli-vol', '--origin',
                     origin.uri, '--cache-size', '1M', '--write-policy',
                     'write_back', '--admission', 'all', '--json'])
    assert again == res

    h = om.connect(res['export_uri'])
    data = os.urandom(256 * 1024)
    h.pwrite(data, 0)
    assert h.pread(len(data), 0) == data
    assert h.pread(len(data), 0) == data
    om.close(h)

    show = ok_json(['--socket', sock, 'volume-show', 'cli-vol', '--json'])
    for k in ('reads', 'writes', 'read_hits', 'read_misses', 'hit_ratio',
              'cached_blocks', 'dirty_blocks', 'origin_read_bytes',
              'origin_write_bytes', 'cache_write_bytes', 'block_size'):
        assert k in show, (k, show)
    assert show['writes'] >= 1 and show['read_hits'] >= 64, show
    assert show['cache_size'] == MiB and show['write_policy'] == 'write_back'
    rc, out, err = run(['--socket', sock, 'volume-show', 'cli-vol'])
    assert rc == 0 and 'read_hits' in out and err == ''
    lst = ok_json(['--socket', sock, 'volume-list', '--json'])
    assert [v['volume_id'] for v in lst['volumes']] == ['cli-vol']
    st = ok_json(['--socket', sock, 'agent-status', '--json'])
    assert [v['volume_id'] for v in st['volumes']] == ['cli-vol']
    assert st['used_bytes'] > 0

    det = ok_json(['--socket', sock, 'volume-detach', 'cli-vol', '--json'])
    assert det['volume_id'] == 'cli-vol'
    # Detach wrote the dirty data back to the origin.
    assert origin.read_file()[:len(data)] == data
    assert ok_json(['--socket', sock, 'agent-status',
                    '--json'])['volumes'] == []
    rc, out, err = run(['--socket', sock, 'volume-detach', 'cli-vol'])
    assert rc == 1


def test_cli_errors(make_agent, make_origin, workdir):
    agent = make_agent(cache_size='8M').start()
    sock = agent.control_socket
    origin = make_origin(MiB, nbd=False)
    # The agent refuses: status 1, the agent's message on one line.
    fails(['--socket', sock, 'volume-show', 'nope', '--json'], 1,
          'nope', 'not attached')
    fails(['--socket', sock, 'volume-detach', 'nope'], 1, 'nope')
    missing = os.path.join(workdir, 'missing.img')
    fails(['--socket', sock, 'volume-attach', 'v', '--origin', missing,
           '--json'], 1, missing)
    fails(['--socket', sock, 'volume-attach', '../v', '--origin',
           origin.path], 1, 'invalid volume id')
    fails(['--socket', sock, 'volume-attach', 'v', '--origin', origin.path,
           '--cache-size', '1G'], 1, 'cache')
    agent.attach('v', origin.path, cache_size=MiB)
    fails(['--socket', sock, 'volume-attach', 'v', '--origin', origin.path,
           '--cache-size', '2M'], 1, 'already attached')
    # Bad command lines: status 2, one line.
    fails(['--socket', sock, 'volume-attach', 'v', '--origin', origin.path,
           '--write-policy', 'write-back'], 2, 'write-policy')
    fails(['--socket', sock, 'volume-attach', 'v'], 2, 'origin')
    fails(['--socket', sock, 'volume-attach', 'v', '--origin', origin.path,
           '--cache-size', 'lots'], 2, 'lots')
    fails(['--socket', sock, 'no-such-command'], 2)
    fails(['--socket', sock, 'volume-show'], 2)
    # No agent: status 3.
    fails(['--socket', os.path.join(workdir, 'nobody.sock'), 'agent-status',
           '--json'], 3, 'nobody.sock')
    agent.stop()
    fails(['--socket', sock, 'agent-status'], 3, sock)


def test_cli_allocation(make_agent, make_origin):
    """rws_n and staging reach the agent; its allocation is shown."""
    agent = make_agent(cache_size='8M').start()
    sock = agent.control_socket
    origin = make_origin(4 * MiB)

    ok_json(['--socket', sock, 'volume-attach', 'alloc-vol', '--origin',
             origin.uri, '--cache-size', '2M', '--admission', 'rws',
             '--rws-n', '2', '--staging', 'address', '--rws-window', '600',
             '--json'])
    show = ok_json(['--socket', sock, 'volume-show', 'alloc-vol', '--json'])
    alloc = show['allocation']
    for k in ('share_bytes', 'used_bytes', 'limit_bytes',
              'rwss_observed_bytes', 'rwss_predicted_bytes',
              'prediction_error', 'window_s', 'rws_n', 'staging'):
        assert k in alloc, (k, alloc)
    assert alloc['rws_n'] == 2 and alloc['window_s'] == 600
    assert alloc['staging']['kind'] == 'address'
    for k in ('area_bytes', 'used_bytes', 'addresses', 'data_blocks',
              'admitted', 'data_hits', 'evicted', 'recalled',
              'history_blocks', 'history_bytes'):
        assert k in alloc['staging'], (k, alloc)
    rc, out, err = run(['--socket', sock, 'volume-show', 'alloc-vol'])
    assert rc == 0 and err == ''
    assert 'allocation.staging.kind' in out and 'address' in out

    whole = ok_json(['--socket', sock, 'allocation', '--json'])
    assert whole['mode'] in ('fixed', 'rwss'), whole
    assert whole['spare'] in ('proportional', 'idle'), whole
    assert whole['capacity_bytes'] == 8 * MiB
    [vol] = whole['volumes']
    assert vol['id'] == 'alloc-vol' and vol['rws_n'] == 2, vol
    st = ok_json(['--socket', sock, 'agent-status', '--json'])
    assert st['allocation']['mode'] == whole['mode']

    rc, out, err = run(['--socket', sock, 'allocation'])
    assert rc == 0 and err == '', (out, err)
    # The settings, then the volumes' table: header, then one row.
    rows = [line.split('|')[1:-1] for line in out.splitlines()
            if line.startswith('| ')]
    header = [row for row in rows if row[0].strip() == 'id']
    assert header and 'rwss_predicted_bytes' in header[0][-1], out
    assert rows[-1][0].strip() == 'alloc-vol', out

    # Bad values: refused by the command line (2) or by the agent (1).
    fails(['--socket', sock, 'volume-attach', 'v2', '--origin', origin.uri,
           '--admission', 'rws', '--rws-n', '8'], 2, 'RWS_N')
    fails(['--socket', sock, 'volume-attach', 'v2', '--origin', origin.uri,
           '--staging', 'lru'], 2, 'staging')
    fails(['--socket', sock, 'volume-attach', 'v2', '--origin', origin.uri,
           '--rws-window', '0'], 2, 'window')
    client = agent.client(unchecked=True)
    for bad in ({'rws_n': 0}, {'rws_n': 8}, {'staging': 'lru'}):
        try:
            client.call('volume-attach', volume_id='v2', origin=origin.uri,
                        admission='rws', **bad)
        except exception.AgentError as exc:
            assert list(bad)[0] in exc.error, (bad, exc.error)
        else:
            raise AssertionError('the agent accepted %r' % bad)
