# SPDX-License-Identifier: Apache-2.0
"""``fcache evacuate``: credentials the OpenStack client's way, its output.

Nova is a stand-in here (the real novaclient against Nova runs in
tests/nova_functional/test_balancing.py); what is checked is where the
credentials come from, the keystoneauth session openstacksdk builds from
a real clouds.yaml, the argument errors and the rows the command prints.
"""

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from nova_ext.balancer import credentials
from nova_ext.balancer import model
from nova_ext.balancer import nova as nova_mod
from nova_ext.balancer import sources
from nova_ext import cli
from nova_ext.commands import evacuate
from tests.unit import test_cli

GiB = 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
run = test_cli.run

CLOUDS_YAML = """\
clouds:
  prod:
    region_name: RegionTwo
    interface: internal
    auth:
      auth_url: https://keystone.example.net:5000/v3
      username: fcache-ops
      password: secret
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
"""

SERVERS = [
    ('0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e', 'web-frontend-01', 'hot'),
    ('1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d', 'db-replica-02', 'warm'),
    ('2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e', 'batch-worker-17', None),
]


class FakeNova(object):
    def servers(self):
        return [nova_mod.Server(vm, name, 'cmp1', 'ACTIVE', None,
                                [vol] if vol else [])
                for vm, name, vol in SERVERS]

    def compute_hosts(self):
        return {'cmp1': True, 'cmp2': True, 'cmp3': True}


class FakeSource(object):
    def loads(self):
        hot = model.Volume('hot', demand_bytes=GiB, cached_bytes=GiB,
                           dirty_bytes=GiB // 8)
        warm = model.Volume('warm', demand_bytes=GiB // 4,
                            cached_bytes=GiB // 4)
        return ({'cmp1': sources.HostLoad('cmp1', 8 * GiB, 3600,
                                          {'hot': hot, 'warm': warm}),
                 'cmp2': sources.HostLoad('cmp2', 8 * GiB, 3600),
                 'cmp3': sources.HostLoad('cmp3', 8 * GiB, 3600)}, {})

    def agent(self, host):
        return None


@pytest.fixture
def connected(monkeypatch):
    calls = []

    def connect(conf, creds=None):
        calls.append(creds)
        return FakeNova(), FakeSource()
    monkeypatch.setattr(evacuate, 'connect', connect)
    for name in ('OS_CLOUD', 'OS_AUTH_URL', 'OS_CLIENT_CONFIG_FILE'):
        monkeypatch.delenv(name, raising=False)
    return calls


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / 'fcache-balancer.conf'
    path.write_text('[fcache_balancer]\nagent_sockets = cmp1:/nonexistent\n')
    return str(path)


# -- where the credentials come from ---------------------------------------

@pytest.mark.parametrize('option, environ, cloud', [
    ('prod', {'OS_CLOUD': 'other', 'OS_AUTH_URL': 'x'}, 'prod'),
    (None, {'OS_CLOUD': 'other', 'OS_AUTH_URL': 'x'}, 'other'),
    (None, {'OS_AUTH_URL': 'https://keystone:5000/v3'}, None),
])
def test_credentials_precedence(option, environ, cloud):
    chosen = credentials.chosen(option, environ)
    assert chosen is not None and chosen.cloud == cloud


def test_no_credentials_means_the_config_file():
    assert credentials.chosen(None, {'OS_USERNAME': 'u'}) is None


# No deprecation noise reaches the operator.
@pytest.mark.filterwarnings('error::DeprecationWarning')
def test_session_from_clouds_yaml(tmp_path, monkeypatch):
    path = tmp_path / 'clouds.yaml'
    path.write_text(CLOUDS_YAML)
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    session, kwargs = credentials.Credentials('prod').nova_kwargs()
    assert kwargs['region_name'] == 'RegionTwo'
    assert kwargs['endpoint_type'] == 'internal'
    auth = session.auth
    assert auth.auth_url == 'https://keystone.example.net:5000/v3'
    assert auth._username == 'fcache-ops'


# No deprecation noise reaches the operator.
@pytest.mark.filterwarnings('error::DeprecationWarning')
def test_session_from_os_variables(monkeypatch, tmp_path):
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(tmp_path / 'none.yaml'))
    for name, value in (('OS_AUTH_URL', 'https://ks.example.org/v3'),
                        ('OS_USERNAME', 'admin'), ('OS_PASSWORD', 'pw'),
                        ('OS_PROJECT_NAME', 'admin'),
                        ('OS_USER_DOMAIN_NAME', 'Default'),
                        ('OS_PROJECT_DOMAIN_NAME', 'Default'),
                        ('OS_REGION_NAME', 'RegionOne')):
        monkeypatch.setenv(name, value)
    creds = credentials.chosen(None)
    session, kwargs = creds.nova_kwargs()
    assert session.auth.auth_url == 'https://ks.example.org/v3'
    assert kwargs['region_name'] == 'RegionOne'


def test_unknown_cloud(capsys, connected, tmp_path, monkeypatch):
    path = tmp_path / 'clouds.yaml'
    path.write_text(CLOUDS_YAML)
    monkeypatch.setenv('OS_CLIENT_CONFIG_FILE', str(path))
    with pytest.raises(Exception) as info:
        credentials.Credentials('staging').nova_kwargs()
    assert "invalid --os-cloud 'staging'" in str(info.value)
    assert 'cloud staging of clouds.yaml' in str(info.value)


def test_os_cloud_reaches_connect_and_needs_no_config_file(
        capsys, connected, monkeypatch, tmp_path):
    # The default configuration file is absent here: with --os-cloud the
    # plan is made without the agents' figures.
    monkeypatch.setattr(evacuate.opts, 'DEFAULT_CONFIG_FILE',
                        str(tmp_path / 'absent.conf'))
    status, out, err = run(capsys, 'evacuate', 'cmp1', '--dry-run',
                           '--os-cloud', 'prod', '-f', 'json')
    assert (status, err) == (0, '')
    assert [c.cloud for c in connected] == ['prod']
    assert len(json.loads(out)) == 3


def test_os_cloud_from_the_environment(capsys, connected, config_file,
                                       monkeypatch):
    monkeypatch.setenv('OS_CLOUD', 'prod')
    status, _, _ = run(capsys, 'evacuate', 'cmp1', '--dry-run',
                       '--config-file', config_file)
    assert status == 0
    assert [c.cloud for c in connected] == ['prod']


def test_config_file_credentials(capsys, connected, config_file):
    status, _, _ = run(capsys, 'evacuate', 'cmp1', '--dry-run',
                       '--config-file', config_file)
    assert status == 0
    assert connected == [None]


# -- argument errors --------------------------------------------------------

@pytest.mark.parametrize('argv, fragments', [
    (['--config-file', '/nonexistent/fcache.conf'],
     ["invalid --config-file '/nonexistent/fcache.conf'", 'no such file',
      '--os-cloud']),
    (['--max-concurrent', '0'], ["invalid --max-concurrent 0",
                                 'must be at least 1']),
    (['--per-destination', 'two'], ['argument --per-destination: invalid '
                                    "int value: 'two'"]),
    (['-c', 'colour'], ["invalid -c 'colour'", 'vm_name', 'strategies']),
])
def test_bad_arguments(capsys, connected, config_file, argv, fragments):
    if '--config-file' not in argv:
        argv = argv + ['--config-file', config_file]
    status, out, err = run(capsys, 'evacuate', 'cmp1', '--dry-run', *argv)
    assert (status, out) == (cli.EXIT_USAGE, '')
    test_cli.assert_one_line_error(err, 'evacuate', *fragments)


def test_missing_host(capsys):
    status, _, err = run(capsys, 'evacuate')
    assert status == cli.EXIT_USAGE
    test_cli.assert_one_line_error(err, 'evacuate: the following arguments '
                                        'are required: HOST')


# -- output -----------------------------------------------------------------

def test_plan_table_fits_and_humanises(capsys, connected, config_file):
    status, out, err = run(capsys, 'evacuate', 'cmp1', '--dry-run',
                           '--config-file', config_file)
    assert (status, err) == (0, '')
    summary, steps = test_cli.tables(out)
    assert test_cli.table(summary)['source'] == 'cmp1'
    assert test_cli.table(summary)['link_bytes'].endswith('iB')
    rows = test_cli.listing(steps)
    assert sorted(r['vm_name'] for r in rows) == sorted(
        name for _, name, _ in SERVERS)
    assert {r['state'] for r in rows} == {'planned'}
    assert max(len(line) for line in out.splitlines()) <= 120, out


def test_plan_csv_and_json(capsys, connected, config_file):
    status, out, _ = run(capsys, 'evacuate', 'cmp1', '--dry-run', '--long',
                         '-f', 'csv', '--config-file', config_file)
    assert status == 0
    rows = {r['vm']: r for r in csv.DictReader(io.StringIO(out))}
    hot = rows[SERVERS[0][0]]
    assert hot['volumes'] == 'hot' and hot['host'] == 'cmp1'
    assert hot['strategies'] in ('none', 'cachemior', 'firepan',
                                 'firepan_if', 'cloudcache', 'hybrid')
    assert rows[SERVERS[2][0]]['volumes'] == ''

    status, out, _ = run(capsys, 'evacuate', 'cmp1', '--dry-run', '--json',
                         '--config-file', config_file)
    assert status == 0
    assert json.loads(out)['dry_run'] is True


def test_progress_lines_off_a_terminal():
    stream = io.StringIO()
    display = evacuate.progress.Progress(stream, unit='VMs')
    show = evacuate.EvacuationProgress(display, 3)

    class Step(object):
        def __init__(self, vm):
            self.vm = model.Vm(vm, 'cmp1')
            self.destination = 'cmp2'

    class Result(object):
        def __init__(self, vm, state):
            self.step, self.state, self.message = Step(vm), state, None
    results = [Result('a', 'running'), Result('b', 'pending'),
               Result('c', 'pending')]
    show('start', results[0], results)
    results[0].state = 'done'
    show('done', results[0], results)
    assert stream.getvalue().splitlines() == [
        'evacuating, 0 of 3 VMs (0.0%), 0 failed, 1 running; start a -> '
        'cmp2',
        'evacuating, 1 of 3 VMs (33.3%), 0 failed, 0 running; done a -> '
        'cmp2']


# -- --help -----------------------------------------------------------------

@pytest.mark.parametrize('code', [
    'from nova_ext.balancer import service; service.main(["--help"])',
    'from nova_ext import cli; cli.main(["evacuate", "--help"])',
])
def test_help_is_quiet_and_names_os_cloud(code):
    # -W default: the deprecation warnings a library hides by default too.
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, '-W', 'default', '-c', code],
                          env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr) == (0, '')
    assert '--os-cloud NAME' in done.stdout
