# SPDX-License-Identifier: Apache-2.0
"""The installed ``fcache-balancer`` console script prints no warnings.

eventlet warns on import that it is deprecated, and oslo.messaging and
oslo.service import it (nova_ext.warnings_filter).  An operator's
``fcache-balancer --help``, ``--version`` and the service's start must
print only what was asked for, and a SIGTERM stops the service at once.
The script is run as installed, in a subprocess, with the work tree
first on its path.
"""

import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(os.path.dirname(sys.executable), 'fcache-balancer')


def _env(tmp_path, **extra):
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
           'HOME': str(tmp_path), 'PYTHONPATH': ROOT, 'LANG': 'C.UTF-8'}
    env.update(extra)
    return env


def _run(tmp_path, *args):
    return subprocess.run([SCRIPT] + list(args), env=_env(tmp_path),
                          cwd=str(tmp_path), capture_output=True,
                          text=True, timeout=120)


def test_help_prints_no_warning(tmp_path):
    res = _run(tmp_path, '--help')
    assert res.returncode == 0, res.stderr
    assert res.stderr == ''
    assert 'usage: fcache-balancer' in res.stdout


def test_version_prints_no_warning(tmp_path):
    from nova_ext import version
    res = _run(tmp_path, '--version')
    assert res.returncode == 0, res.stderr
    assert res.stderr == ''
    assert res.stdout.strip() == version.version_string()


def test_service_start_prints_no_warning(tmp_path):
    # A real start: oslo.messaging's notifier and oslo.service's launcher
    # are imported and the first observation runs (its failures to reach
    # Nova and the agent go to the log file, not to stderr).
    log = tmp_path / 'balancer.log'
    conf = tmp_path / 'balancer.conf'
    conf.write_text(
        '[DEFAULT]\nlog_file = %s\n'
        '[fcache_balancer]\ndry_run = true\n'
        'agent_sockets = h1:%s\n' % (log, tmp_path / 'no-agent.sock'))
    env = _env(tmp_path, OS_AUTH_URL='http://127.0.0.1:9/v3',
               OS_USERNAME='balancer', OS_PASSWORD='secret',
               OS_PROJECT_NAME='service', OS_USER_DOMAIN_NAME='Default',
               OS_PROJECT_DOMAIN_NAME='Default')
    proc = subprocess.Popen([SCRIPT, '--config-file', str(conf)], env=env,
                            cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if log.exists() and 'observation 0' in log.read_text():
                break
            time.sleep(0.2)
        assert proc.poll() is None, 'the balancer stopped: %s' % (
            log.read_text() if log.exists() else '(no log)')
        assert 'observation 0' in log.read_text()
        # The observations are a minute apart: a SIGTERM must not wait
        # for the next one.
        stopping = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - stopping
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert err == ''
    assert proc.returncode == 0
    assert took < 10, 'SIGTERM took %.1f s' % took
    assert 'SIGTERM: stopping' in log.read_text()
