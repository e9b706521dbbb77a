# SPDX-License-Identifier: Apache-2.0
"""The agent's metrics (doc/admin/monitoring.rst) from the real agent.

Real I/O through nbdkit and libnbd, every read checked against the
oracle; the figures are read with prometheus_client's parser, the one
Prometheus' own Python tooling uses, from the ``metrics`` control
operation and from the textfile node-exporter would read:

* a known set of blocks read twice counts exactly one miss then one hit
  per block, in the counters and in every hit-ratio window;
* the textfile is replaced whole (a new inode each time, never a partial
  file) and always parses;
* ``volume-stats-reset`` zeroes one volume's counters (not another's)
  and says when, and ``all`` zeroes the host's too.
"""

import json
import math
import os
import re
import stat
import subprocess
import time

from prometheus_client import parser
import pytest
import yaml

from nova_ext import exception
from nova_ext import migration

from fcache_testkit import harness
from fcache_testkit import oracle as om

from . import test_cli as cli

MiB = 1 << 20
BS = 4096
BLOCKS = 64


def parse(text):
    """{(sample name, ((label, value), ...)): value}, and the families."""
    families = list(parser.text_string_to_metric_families(text))
    samples = {}
    for fam in families:
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in samples, key
            samples[key] = s.value
    return samples, families


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def setup(make_agent, make_origin, workdir):
    prom = os.path.join(workdir, 'textfile', 'fcache.prom')
    os.makedirs(os.path.dirname(prom))
    agent = make_agent(metrics_path=prom, metrics_interval=1).start()
    origin = make_origin(8 * MiB)
    return agent, origin, prom


def attach(agent, volume_id, origin):
    res = agent.client().call('volume-attach', volume_id=volume_id,
                              origin=origin.server.uri, cache_size=4 * MiB,
                              write_policy='write_through', admission='all')
    return om.connect(res['export_uri'], name=volume_id)


def read_twice(h, orc, offset):
    for _ in range(2):
        got = h.pread(BLOCKS * BS, offset)
        assert orc.check(offset, got) is None


def test_known_blocks_read_twice(setup):
    agent, origin, prom = setup
    orc = om.Oracle(origin.content)
    h = attach(agent, 'v1', origin)
    read_twice(h, orc, MiB)
    samples, families = parse(agent.client().metrics())

    assert value(samples, 'fcache_volume_cache_misses_total',
                 volume='v1') == BLOCKS
    assert value(samples, 'fcache_volume_cache_hits_total',
                 volume='v1') == BLOCKS
    assert value(samples, 'fcache_volume_read_bytes_total',
                 volume='v1') == 2 * BLOCKS * BS
    assert value(samples, 'fcache_volume_origin_read_bytes_total',
                 volume='v1') == BLOCKS * BS
    assert value(samples, 'fcache_volume_dirty_blocks', volume='v1') == 0
    for window in ('5m', '1h', '1d'):
        assert value(samples, 'fcache_volume_hit_ratio', volume='v1',
                     window=window) == 0.5
        assert value(samples, 'fcache_host_hit_ratio', window=window) == 0.5
    # The host counts what its volumes count.
    assert value(samples, 'fcache_host_cache_hits_total') == BLOCKS
    assert value(samples, 'fcache_host_volumes') == 1
    assert value(samples, 'fcache_volume_info', volume='v1', engine='ucache',
                 write_policy='write_through', state='attached') == 1
    # The window in force: the default, a fixed hour.
    assert value(samples, 'fcache_volume_allocation_window_seconds',
                 volume='v1') == 3600
    assert value(samples, 'fcache_volume_allocation_window_auto',
                 volume='v1') == 0
    # Conventions: counters end in _total, every family has its HELP.
    types = {f.name: f.type for f in families}
    assert types['fcache_volume_cache_hits'] == 'counter'
    assert types['fcache_volume_hit_ratio'] == 'gauge'
    assert all(f.documentation for f in families)

    # The textfile catches up within an interval or two.
    def textfile_counts():
        with open(prom) as f:
            s, _ = parse(f.read())
        # A file written before the attach has no v1 yet.
        return s.get(('fcache_volume_cache_hits_total', (('volume', 'v1'),)))
    harness.wait_for(lambda: textfile_counts() == BLOCKS, 10,
                     'the textfile to show the hits')
    om.close(h)


def test_textfile_is_replaced_whole(setup):
    agent, origin, prom = setup
    h = attach(agent, 'v1', origin)
    harness.wait_for(lambda: os.path.exists(prom), 10, 'the first textfile')
    assert stat.S_IMODE(os.stat(prom).st_mode) == 0o644
    inodes = set()
    deadline = time.monotonic() + 3.5
    while time.monotonic() < deadline:
        with open(prom) as f:
            inodes.add(os.fstat(f.fileno()).st_ino)
            text = f.read()
        # Whole, every time: it parses, and its last family is there.
        assert text.endswith('\n'), text[-200:]
        samples, _ = parse(text)
        if ('fcache_volume_cache_size_bytes', (('volume', 'v1'),)) in samples:
            assert value(samples, 'fcache_volume_move_running',
                         volume='v1') == 0
        time.sleep(0.01)
    # Every interval a new file was renamed over the old one, not the
    # old one rewritten in place.
    assert len(inodes) >= 3, inodes
    # Prometheus' own linter (the parser node-exporter uses, and the
    # naming conventions: units, _total) accepts the file.
    with open(prom) as f:
        r = subprocess.run(['promtool', 'check', 'metrics'], stdin=f,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=60)
    assert r.returncode == 0 and r.stdout == '', r.stdout
    # Nothing else in the collector's directory but the file and, for a
    # moment, its temporary (which the collector skips: not *.prom).
    assert set(os.listdir(os.path.dirname(prom))) <= {
        'fcache.prom', 'fcache.prom.tmp'}
    om.close(h)


def test_reset_zeroes_counters(setup, make_origin):
    agent, origin, prom = setup
    orc = om.Oracle(origin.content)
    h = attach(agent, 'v1', origin)
    origin2 = make_origin(4 * MiB)
    orc2 = om.Oracle(origin2.content)
    h2 = attach(agent, 'v2', origin2)
    read_twice(h, orc, 0)
    read_twice(h2, orc2, 0)
    client = agent.client()
    before = time.time()
    res = client.reset_stats('v1')
    assert res['volume_id'] == 'v1'
    assert before - 1 <= res['reset_time'] <= time.time() + 1
    samples, _ = parse(client.metrics())
    for name in ('fcache_volume_cache_hits_total',
                 'fcache_volume_cache_misses_total',
                 'fcache_volume_read_bytes_total',
                 'fcache_volume_read_requests_total'):
        assert value(samples, name, volume='v1') == 0, name
    assert value(samples, 'fcache_volume_stats_reset_timestamp_seconds',
                 volume='v1') == pytest.approx(res['reset_time'], abs=1e-3)
    assert math.isnan(value(samples, 'fcache_volume_hit_ratio', volume='v1',
                            window='5m'))
    # Only v1: v2 keeps its figures, and the host's totals keep what v1
    # did before its reset.
    assert value(samples, 'fcache_volume_cache_hits_total',
                 volume='v2') == BLOCKS
    assert value(samples, 'fcache_volume_hit_ratio', volume='v2',
                 window='5m') == 0.5
    assert value(samples, 'fcache_host_cache_hits_total') == 2 * BLOCKS

    # Counting starts again from zero: the same blocks, all hits now.
    read_twice(h, orc, 0)
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_volume_cache_hits_total',
                 volume='v1') == 2 * BLOCKS
    assert value(samples, 'fcache_volume_cache_misses_total',
                 volume='v1') == 0
    assert value(samples, 'fcache_volume_hit_ratio', volume='v1',
                 window='1h') == 1.0

    res = client.reset_stats()
    assert res['reset'] == 'all'
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_host_cache_hits_total') == 0
    for vol in ('v1', 'v2'):
        assert value(samples, 'fcache_volume_cache_hits_total',
                     volume=vol) == 0
    assert value(samples, 'fcache_host_stats_reset_timestamp_seconds') == \
        pytest.approx(res['reset_time'], abs=1e-3)

    with pytest.raises(exception.AgentError) as e:
        client.reset_stats('nope')
    assert e.value.errno == 2 and 'not attached' in str(e.value)
    # Neither a volume nor all: refused.
    with pytest.raises(exception.AgentError) as e:
        client.call('volume-stats-reset')
    assert e.value.errno == 22
    om.close(h)
    om.close(h2)


def test_bad_metrics_path_is_refused(make_agent, workdir):
    agent = make_agent(metrics_path=os.path.join(workdir, 'fcache.txt'))
    rc, log = agent.start_expect_failure()
    assert rc != 0 and 'metrics_path' in log and '.prom' in log, log


def test_cli(setup):
    agent, origin, prom = setup
    orc = om.Oracle(origin.content)
    h = attach(agent, 'v1', origin)
    read_twice(h, orc, 2 * MiB)
    sock = ['--socket', agent.control_socket]
    rc, out, err = cli.run(['metrics'] + sock)
    assert rc == 0 and err == '', err
    samples, _ = parse(out)
    assert value(samples, 'fcache_volume_cache_hits_total',
                 volume='v1') == BLOCKS
    res = cli.ok_json(['volume-stats-reset', 'v1', '--json'] + sock)
    assert res['volume_id'] == 'v1'
    samples, _ = parse(cli.ok_json(['metrics', '--json'] + sock)['text'])
    assert value(samples, 'fcache_volume_cache_hits_total', volume='v1') == 0
    rc, out, err = cli.run(['volume-stats-reset', '--all'] + sock)
    assert rc == 0 and 'reset' in out and 'all' in out, (out, err)
    # A volume or --all, never neither: usage error, nothing reset.
    cli.fails(['volume-stats-reset'] + sock, 2, 'volume-stats-reset')
    cli.fails(['volume-stats-reset', 'nope'] + sock, 1, 'not attached')
    om.close(h)


REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RULES = os.path.join(REPO, 'etc', 'prometheus', 'fcache-alerts.yml')
DASHBOARD = os.path.join(REPO, 'etc', 'grafana', 'fcache-dashboard.json')
RULE_TESTS = os.path.join(REPO, 'tests', 'prometheus',
                          'fcache-alerts-test.yml')
METRIC = re.compile(r'\bfcache_[a-z0-9_]+')


def dashboard_queries(dash):
    for panel in dash['panels']:
        for target in panel['targets']:
            yield target['expr']
    for var in dash['templating']['list']:
        if var['type'] == 'query':
            yield var['definition']


def test_rules_and_dashboard_use_what_the_agent_exports(setup):
    agent, origin, prom = setup
    h = attach(agent, 'v1', origin)
    samples, families = parse(agent.client().metrics())
    # A name PromQL may use: a sample's (cache_hits_total) or a gauge
    # family's.
    exported = {name for name, _ in samples}

    with open(RULES) as f:
        rules = yaml.safe_load(f)
    groups = {g['name']: g['rules'] for g in rules['groups']}
    assert set(groups) == {'fcache-agent', 'fcache-cache',
                           'fcache-migrations'}
    alerts = {r['alert']: r for g in groups.values() for r in g}
    assert {'FcacheAgentMetricsStale', 'FcacheHitRatioCollapsed',
            'FcacheDirtyBacklogGrowing',
            'FcacheLiveMigrationFailed'} <= set(alerts)
    used = set()
    for name, rule in alerts.items():
        assert rule['labels']['severity'] in ('warning', 'critical'), name
        assert rule['annotations']['summary'], name
        used |= set(METRIC.findall(rule['expr']))
    with open(DASHBOARD) as f:
        dash = json.load(f)
    ids = [p['id'] for p in dash['panels']]
    assert len(ids) == len(set(ids))
    for query in dashboard_queries(dash):
        used |= set(METRIC.findall(query))
    assert used, 'no fcache metric named'
    assert used <= exported, sorted(used - exported)
    # The rules are valid PromQL: Prometheus' own checker says so.
    r = subprocess.run(['promtool', 'check', 'rules', RULES],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert 'SUCCESS: %d rules found' % len(alerts) in r.stdout, r.stdout
    # And each fires on the series it is for, and only on them
    # (tests/prometheus/fcache-alerts-test.yml).
    r = subprocess.run(['promtool', 'test', 'rules', RULE_TESTS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=60)
    assert r.returncode == 0 and 'SUCCESS' in r.stdout, r.stdout
    om.close(h)


def test_migrations_counted_once_each(make_agent, make_origin):
    """A completed migration on both ends, then an aborted one."""
    src = make_agent(name='src', metrics_interval=1).start()
    dst = make_agent(name='dst', metrics_interval=1).start()
    origin = make_origin(8 * MiB)
    orc = om.Oracle(origin.content)
    h = attach(src, 'vol1', origin)
    read_twice(h, orc, 0)
    om.close(h)
    cached = src.show('vol1')['cached_blocks']
    assert cached == BLOCKS
    res = migration.migrate(src.client(), dst.client(), 'vol1', 'hybrid')
    assert res['state'] == 'completed', res

    def counts(agent, role):
        s, _ = parse(agent.client().metrics())
        return {o: value(s, 'fcache_migrations_total', role=role, outcome=o)
                for o in ('completed', 'failed', 'aborted')}, s
    c, s = counts(src, 'source')
    assert c == {'completed': 1, 'failed': 0, 'aborted': 0}, c
    assert value(s, 'fcache_migration_bytes_total',
                 role='source') == res['bytes_transferred'] == cached * BS
    assert 0 < value(s, 'fcache_migration_last_duration_seconds',
                     role='source') <= res['duration_s'] + 1
    assert value(s, 'fcache_migrations_in_progress', role='source') == 0
    # The destination completes once the source has its COMPLETE.
    harness.wait_for(lambda: counts(dst, 'destination')[0]['completed'] == 1,
                     10, 'the destination to count its migration')
    c, s = counts(dst, 'destination')
    assert c == {'completed': 1, 'failed': 0, 'aborted': 0}, c
    # A second look counts nothing again.
    assert counts(src, 'source')[0]['completed'] == 1

    # Back the other way, aborted before the switchover: the new source
    # (dst) counts an abort, the completed count stays.
    p = migration.prepare(dst.client(), src.client(), 'vol1', 'hybrid')
    assert dst.client().call('migration-status', migration_id=p[
        'migration_id'])['state'] == 'prepared'
    migration.abort(dst.client(), src.client(), p['migration_id'])
    c, _ = counts(dst, 'source')
    assert c == {'completed': 0, 'failed': 0, 'aborted': 1}, c
    c, _ = counts(src, 'destination')
    assert c == {'completed': 0, 'failed': 0, 'aborted': 1}, c
    assert counts(src, 'source')[0]['completed'] == 1


def test_monitoring_doc_lists_every_metric(setup):
    """doc/admin/monitoring.rst names what the agent exports, no more."""
    agent, origin, prom = setup
    _, families = parse(agent.client().metrics())
    # Every family is declared (HELP, TYPE) even without a sample (the
    # move gauges of an agent whose volumes never moved).
    exported = {f.name + '_total' if f.type == 'counter' else f.name
                for f in families}
    with open(os.path.join(REPO, 'doc', 'admin', 'monitoring.rst')) as f:
        doc = f.read()
    section = doc.split('\nMetrics\n=======\n', 1)[1].split(
        '\nResetting\n', 1)[0]
    listed = set(re.findall(r'``(fcache_[a-z0-9_]+)``', section))
    assert exported - listed == set(), 'not documented'
    assert listed - exported == set(), 'documented, not exported'


def test_storage_moves_counted(make_agent, make_origin):
    """A move done and one aborted, each counted once with its figures."""
    agent = make_agent(metrics_interval=1).start()
    a = make_origin(8 * MiB, name='A')
    b = make_origin(8 * MiB, name='B', filled_fraction=0.3)
    h = attach(agent, 'v1', a)
    client = agent.client()
    client.call('volume-move', volume_id='v1', to=b.server.uri, scheme='lr')
    harness.wait_for(lambda: client.call(
        'volume-move-status', volume_id='v1')['state'] == 'done', 30,
        'the move to end')
    st = client.call('volume-move-status', volume_id='v1')
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_storage_moves_total', outcome='done') == 1
    assert value(samples, 'fcache_storage_moves_total', outcome='failed') == 0
    assert value(samples, 'fcache_storage_move_bytes_total') == \
        st['bytes_copied'] == 8 * MiB
    assert value(samples, 'fcache_volume_move_running', volume='v1') == 0
    assert value(samples, 'fcache_volume_move_copied_bytes',
                 volume='v1') == 8 * MiB
    assert value(samples, 'fcache_volume_move_duration_seconds',
                 volume='v1') == pytest.approx(st['elapsed_s'])
    # Seen again by later samples (the file's, the next request's): the
    # same move is not counted twice.
    time.sleep(1.5)
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_storage_moves_total', outcome='done') == 1

    # Back to A, slowly, and aborted while it runs.
    client.call('volume-move', volume_id='v1', to=a.server.uri, scheme='lr',
                rate_limit_mbps=1)
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_volume_move_running', volume='v1') == 1
    assert client.call('volume-move-abort',
                       volume_id='v1')['state'] == 'aborted'
    samples, _ = parse(client.metrics())
    assert value(samples, 'fcache_storage_moves_total',
                 outcome='aborted') == 1
    assert value(samples, 'fcache_storage_moves_total', outcome='done') == 1
    assert value(samples, 'fcache_volume_move_running', volume='v1') == 0
    om.close(h)


def write_back_volume(agent, origin):
    res = agent.client().call(
        'volume-attach', volume_id='wb', origin=origin.server.uri,
        cache_size=4 * MiB, write_policy='write_back', admission='all')
    return om.connect(res['export_uri'], name='wb')


@pytest.mark.parametrize('dirty_high_percent', (100, 0))
def test_dirty_backlog_and_write_back(make_agent, make_origin,
                                      dirty_high_percent):
    """16 blocks written, held dirty or written back at once.

    dirty_high_percent 100: write-back only when the cache is full;
    0: at once.  The gauges and counters say which.
    """
    agent = make_agent(metrics_interval=1,
                       dirty_high_percent=dirty_high_percent).start()
    origin = make_origin(8 * MiB)
    client = agent.client()
    h = write_back_volume(agent, origin)
    data = bytes(range(256)) * (16 * BS // 256)
    h.pwrite(data, 3 * MiB)
    h.flush()
    if dirty_high_percent == 0:
        harness.wait_for(lambda: client.show_volume('wb')['dirty_blocks'] ==
                         0, 20, 'write-back')
    shown = client.show_volume('wb')
    samples, _ = parse(client.metrics())
    dirty = 16 if dirty_high_percent == 100 else 0
    assert shown['dirty_blocks'] == dirty, shown
    assert value(samples, 'fcache_volume_dirty_blocks', volume='wb') == dirty
    assert value(samples, 'fcache_volume_dirty_bytes',
                 volume='wb') == dirty * BS
    assert value(samples, 'fcache_host_dirty_bytes') == dirty * BS
    assert value(samples, 'fcache_volume_written_bytes_total',
                 volume='wb') == 16 * BS
    cleaned = shown['writebacks']
    assert cleaned == (0 if dirty else 16), shown
    assert value(samples, 'fcache_volume_writeback_blocks_total',
                 volume='wb') == cleaned
    assert value(samples, 'fcache_volume_writeback_bytes_total',
                 volume='wb') == cleaned * BS
    assert value(samples, 'fcache_host_writeback_bytes_total') == cleaned * BS
    assert value(samples, 'fcache_volume_origin_written_bytes_total',
                 volume='wb') == shown['origin_write_bytes']
    om.close(h)
