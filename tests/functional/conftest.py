# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the functional tests: the real agent (ASan build), nbdkit.

* ``workdir``: a short private directory (unix socket paths are limited to
  107 bytes, so not pytest's long tmp_path), removed after a passing test.
* ``agent_binary``: the ASan/UBSan fcache-agent (built once per session).
* ``make_agent(**config)``: an :class:`harness.Agent` writing its config in
  workdir; started by the test (``.start()``).  At teardown every agent is
  stopped and its log is checked for sanitizer reports: a report fails
  the test.
* ``make_origin(size, ...)``: a sparse origin file with random data in part
  of it, optionally served by nbdkit; returns an :class:`Origin` with the
  initial content (the oracle's starting point).
"""

import os
import shutil
import tempfile

import pytest

from fcache_testkit import harness
from fcache_testkit import oracle as oracle_mod


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'scripted_peer: the test plays one end of the migration '
        'stream itself; its agents speak it in plaintext (migration_tls = '
        'none)')


def pytest_collection_modifyitems(config, items):
    # Every functional test is bounded even when run without --timeout.
    for item in items:
        if item.get_closest_marker('timeout') is None:
            item.add_marker(pytest.mark.timeout(120))


def _require(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip('missing tools: %s (run tools/setup.sh)' %
                    ', '.join(missing))


@pytest.fixture(scope='session')
def session_dir():
    d = tempfile.mkdtemp(prefix='fcft-')
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope='session')
def agent_binary(session_dir):
    return harness.ensure_asan_agent(session_dir)


@pytest.fixture
def workdir(request):
    d = tempfile.mkdtemp(prefix='fc-')
    yield d
    failed = any(getattr(request.node, 'rep_' + w, None) is not None and
                 getattr(request.node, 'rep_' + w).failed
                 for w in ('setup', 'call'))
    if failed or os.environ.get('FCACHE_KEEP_TMP'):
        print('functional test files kept in %s' % d)
    else:
        shutil.rmtree(d, ignore_errors=True)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, 'rep_' + rep.when, rep)


class Origin(object):
    """An origin volume: a file, and maybe an nbdkit serving it."""

    def __init__(self, path, content, server=None):
        self.path = path
        self.content = content
        self.server = server
        self.size = len(content)

    @property
    def uri(self):
        return self.server.uri if self.server else self.path

    def read_file(self):
        with open(self.path, 'rb') as f:
            return f.read()


@pytest.fixture
def make_origin(workdir):
    servers = []
    counter = [0]

    def make(size, nbd=True, seed=None, filters=(), filter_args=(),
             filled_fraction=0.5, name=None, options=()):
        counter[0] += 1
        name = name or 'origin%d' % counter[0]
        path = os.path.join(workdir, name + '.img')
        content = harness.make_origin_file(
            path, size, seed=counter[0] if seed is None else seed,
            filled_fraction=filled_fraction)
        server = None
        if nbd:
            _require('nbdkit')
            server = harness.NbdkitOrigin(workdir, name, path,
                                          filters=filters,
                                          filter_args=filter_args,
                                          options=options).start()
            servers.append(server)
        return Origin(path, content, server)

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def make_agent(agent_binary, workdir, make_origin, request):
    # Depends on make_origin so that agents stop before their origins do.
    agents = []
    # A test that plays one end of the transfer stream itself, frame by
    # frame, speaks it in plaintext: it tests what the agent does with the
    # frames an authenticated peer may send, which TLS does not change.
    # The TLS layer in front of them is tested in test_migration_tls.py.
    scripted = request.node.get_closest_marker('scripted_peer') is not None

    def make(name='agent', **config):
        if scripted:
            config.setdefault('migration_tls', 'none')
        a = harness.Agent(agent_binary, workdir, name=name, **config)
        agents.append(a)
        return a

    yield make

    problems = []
    for a in agents:
        try:
            if a.running:
                a.stop(timeout=60, check=False)
                rc = a.proc.returncode
                if rc != 0:
                    problems.append('%s: exit status %s at final SIGTERM' %
                                    (a.dir, rc))
        except AssertionError as exc:
            problems.append(str(exc))
        finally:
            a.kill()
        reports = a.sanitizer_reports()
        if reports:
            log = a.log()
            i = log.find(reports[0])
            problems.append('sanitizer report in %s:\n%s' % (
                a.logfile, log[max(0, i - 2000):i + 6000]))
    if problems:
        pytest.fail('agent teardown: ' + '\n'.join(problems), pytrace=False)


@pytest.fixture
def agent(make_agent):
    """A started agent with a 16 MiB cache of 4 KiB blocks."""
    return make_agent().start()


def attach_and_connect(agent, volume_id, origin, **kw):
    res = agent.attach(volume_id, origin.uri, **kw)
    h = oracle_mod.connect(res['export_uri'], name=volume_id)
    return res, h
