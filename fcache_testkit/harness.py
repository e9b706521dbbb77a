# SPDX-License-Identifier: Apache-2.0
"""Processes the functional tests drive: the fcache agent and nbdkit origins.

Everything here is bounded in time: every wait has a deadline and a
process that does not answer is killed.  The agent is the ASan/UBSan build
(``make -C fcache_agent asan``); its stderr goes to a log file that is
checked for sanitizer reports when the test ends.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from nova_ext import agent as agent_mod

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AGENT_DIR = os.path.join(REPO, 'fcache_agent')
ASAN_AGENT = os.path.join(AGENT_DIR, 'build', 'asan', 'fcache-agent')

# What a sanitizer writes when it finds something, and the test build's
# held-lock check (fcache_agent/src/common/lockcheck.c).
SANITIZER_PATTERNS = (
    'ERROR: AddressSanitizer',
    'ERROR: LeakSanitizer',
    'runtime error:',
    'WARNING: ThreadSanitizer',
    'lock assertion failed:',
)

SANITIZER_ENV = {
    # halt_on_error: the first report stops the agent, so it cannot go on
    # serving corrupted state; exitcode 86 makes that recognisable.
    'ASAN_OPTIONS': 'halt_on_error=1:abort_on_error=0:exitcode=86:'
                    'detect_leaks=1:detect_stack_use_after_return=0:'
                    'strict_string_checks=1:print_summary=1',
    'UBSAN_OPTIONS': 'print_stacktrace=1:halt_on_error=1',
    'LSAN_OPTIONS': 'exitcode=87',
}


def free_tcp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


class TimeoutExpired(AssertionError):
    pass


def wait_for(predicate, timeout, what, interval=0.02):
    """Poll ``predicate`` until it returns true, at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutExpired('timed out after %.1f s waiting for %s' %
                                 (timeout, what))
        time.sleep(interval)


def _thread_states(pid):
    states = []
    for tid in os.listdir('/proc/%d/task' % pid):
        try:
            with open('/proc/%d/task/%s/stat' % (pid, tid)) as f:
                # The state follows the command name, which may hold spaces.
                states.append(f.read().rsplit(')', 1)[1].split()[0])
        except OSError:
            pass                # the thread exited meanwhile
    return states


def pause_process(pid, timeout=10):
    """SIGSTOP ``pid`` and return once every one of its threads is stopped.

    kill(2) returns as soon as the signal is queued: the kernel wakes one
    thread to start the group stop, and until that thread runs the others
    keep going.  On a loaded machine a server thread may answer one more
    request in that window, which a test of a silent peer must not see.
    """
    os.kill(pid, signal.SIGSTOP)
    wait_for(lambda: all(s in ('T', 't') for s in _thread_states(pid)),
             timeout, 'process %d to stop' % pid, interval=0.001)


def sanitizer_reports(text):
    """Return the lines of ``text`` that a sanitizer report starts with."""
    return [line for line in text.splitlines()
            if any(p in line for p in SANITIZER_PATTERNS)]


# ---------------------------------------------------------------------------
# Origins
# ---------------------------------------------------------------------------

def make_origin_file(path, size, seed=0, filled_fraction=0.5, chunk=1 << 20):
    """Create a sparse file of ``size`` bytes, part of it random data.

    Every other ``chunk`` (by a seeded choice) holds random bytes, the rest
    is a hole, so that reads check real data and zeroes alike.  Returns the
    initial content as a bytearray (the oracle's starting point).
    """
    import random
    rng = random.Random(seed)
    content = bytearray(size)
    with open(path, 'wb') as f:
        f.truncate(size)
        for off in range(0, size, chunk):
            if rng.random() < filled_fraction:
                n = min(chunk, size - off)
                data = rng.randbytes(n)
                content[off:off + n] = data
                f.seek(off)
                f.write(data)
    return content


class NbdkitOrigin(object):
    """An nbdkit server exporting a file over a unix socket."""

    def __init__(self, directory, name, path, filters=(), filter_args=(),
                 readonly=False, options=(), scheme='nbd+unix'):
        # options: nbdkit's own (--tls=require ...); scheme: nbds+unix for
        # a server that requires TLS.
        self.options = list(options)
        self.scheme = scheme
        self.directory = directory
        self.name = name
        self.path = path
        self.socket = os.path.join(directory, '%s.nbd.sock' % name)
        self.pidfile = os.path.join(directory, '%s.nbd.pid' % name)
        self.logfile = os.path.join(directory, '%s.nbdkit.log' % name)
        self.filters = list(filters)
        self.filter_args = list(filter_args)
        self.readonly = readonly
        self.proc = None

    @property
    def uri(self):
        return '%s:///?socket=%s' % (self.scheme, self.socket)

    def start(self, timeout=10):
        for p in (self.socket, self.pidfile):
            if os.path.exists(p):
                os.unlink(p)
        cmd = ['nbdkit', '--exit-with-parent', '-f', '-U', self.socket,
               '-P', self.pidfile]
        if self.readonly:
            cmd.append('-r')
        cmd += self.options
        for f in self.filters:
            cmd.append('--filter=%s' % f)
        cmd += ['file', self.path] + self.filter_args
        log = open(self.logfile, 'ab')
        try:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL)
        finally:
            log.close()

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError('nbdkit exited with %s: %s' % (
                    self.proc.returncode, self.log()))
            return os.path.exists(self.pidfile) and os.path.exists(self.socket)
        wait_for(ready, timeout, 'nbdkit to listen on %s' % self.socket)
        return self

    def log(self):
        try:
            with open(self.logfile, 'r', errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def stop(self, timeout=10, grace=1):
        """SIGTERM, then SIGKILL if nbdkit is still there after ``grace`` s.

        nbdkit 1.32 does not exit on SIGTERM while a client that has sent
        requests stays connected (an agent that still has the volume):
        waiting longer would only delay the SIGKILL.  Without such a
        client it exits at once.
        """
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)

    # nbdkit 1.32 (Debian 12) can abort when a client dies with replies
    # still being sent: a worker finds the connection's socket already
    # closed.  Upstream's bug, not the agent's, and real shared storage
    # does not go away when a client is killed.
    KNOWN_CRASH = "raw_send_socket: Assertion `sock >= 0' failed"

    def revive_after_known_crash(self):
        """Restart nbdkit if it died of KNOWN_CRASH; True if it did.

        KNOWN_CRASH follows a client killed in the middle of its requests.
        Any other death fails the test with nbdkit's log.
        """
        if self.proc is None or self.proc.poll() is None:
            return False
        log = self.log()
        if self.KNOWN_CRASH not in log:
            raise AssertionError('origin nbdkit exited with %s:\n%s'
                                 % (self.proc.returncode, log[-3000:]))
        self.start()
        return True


# ---------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------

class AgentExited(AssertionError):
    pass


class UncheckedClient(agent_mod.AgentClient):
    """An AgentClient without nova_ext's check of requests.

    It sends what nova_ext.control_check would stop, as a client that
    does not check would, so that a test sees the agent's own refusal.
    """

    def _check_request(self, op, args):
        pass


class Agent(object):
    """One fcache-agent process (restartable on the same state_dir).

    ``start()`` writes nothing but starts the binary with the config file
    written at construction, and waits until the control socket answers
    ``agent-status``.  ``stop()`` is SIGTERM (clean shutdown), ``kill()``
    SIGKILL (crash).  Every run appends its stderr to ``self.logfile``.
    """

    def __init__(self, binary, directory, name='agent', cache_size='16M',
                 block_size='4K', writeback_interval_ms=100,
                 log_level='debug', **extra):
        self.binary = binary
        self.dir = os.path.join(directory, name)
        os.makedirs(self.dir, exist_ok=True)
        self.control_socket = os.path.join(self.dir, 'ctl.sock')
        self.state_dir = os.path.join(self.dir, 'state')
        self.export_dir = os.path.join(self.dir, 'exp')
        self.config_path = os.path.join(self.dir, 'agent.conf')
        self.logfile = os.path.join(self.dir, 'agent.log')
        self.settings = {
            'control_socket': self.control_socket,
            'state_dir': self.state_dir,
            'export_dir': self.export_dir,
            'cache_size': cache_size,
            'block_size': block_size,
            'log_level': log_level,
            'writeback_interval_ms': writeback_interval_ms,
            # Keep the agent well inside the 2-core budget.
            'nbd_threads': 4,
            'origin_connections': 2,
            # Not used by these tests; a fixed port would collide between
            # agents, so take one the kernel says is free.
            'migration_listen': '127.0.0.1:%d' % free_tcp_port(),
            # The tests' origins live in their work directory; the agent's
            # own state_dir below it stays refused (origin/origin_policy.c).
            'origin_prefixes': os.path.join(directory, ''),
        }
        self.settings.update(extra)
        self.write_config()
        self.proc = None
        self.runs = 0
        # Added to the environment of the runs to come (NOTIFY_SOCKET, ...).
        self.env = {}

    # -- configuration --------------------------------------------------

    def write_config(self):
        lines = ['[agent]']
        for k, v in self.settings.items():
            if v is None:
                continue
            lines.append('%s = %s' % (k, v))
        with open(self.config_path, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    @property
    def meta_path(self):
        return os.path.join(self.state_dir, 'cache.meta')

    @property
    def cache_path(self):
        return self.settings.get('cache_path') or os.path.join(
            self.state_dir, 'cache.img')

    # -- process ----------------------------------------------------------

    def _spawn(self):
        env = dict(os.environ)
        env.update(SANITIZER_ENV)
        env.update(self.env)
        with open(self.logfile, 'ab') as log:
            self.runs += 1
            log.write(('\n===== fcache-agent run %d (%s) =====\n' % (
                self.runs, time.strftime('%H:%M:%S'))).encode())
            log.flush()
            # Before the process exists: it may write (and exit) at once.
            self._run_log_start = log.tell()
            self.proc = subprocess.Popen(
                [self.binary, '--config', self.config_path],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env)

    def start(self, timeout=30):
        assert not self.running, 'agent already running'
        self._spawn()

        def ready():
            if self.proc.poll() is not None:
                raise AgentExited('fcache-agent exited with status %s during '
                                  'start-up; log:\n%s' % (
                                      self.proc.returncode, self.run_log()))
            if not os.path.exists(self.control_socket):
                return False
            try:
                return self.client(timeout=5).status()
            except Exception:
                return False
        wait_for(ready, timeout, 'the agent control socket %s' %
                 self.control_socket, interval=0.05)
        return self

    def start_expect_failure(self, timeout=30):
        """Start the agent expecting it to refuse; return (status, run log)."""
        assert not self.running, 'agent already running'
        self._spawn()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError('fcache-agent kept running (expected it to '
                                 'refuse to start); log:\n%s' % self.run_log())
        return rc, self.run_log()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, timeout=60, check=True):
        """Clean shutdown (SIGTERM); returns the exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError('fcache-agent did not stop within %s s '
                                     'of SIGTERM (killed); log tail:\n%s' % (
                                         timeout, self.run_log()[-4000:]))
        rc = self.proc.returncode
        if check and rc != 0:
            raise AssertionError('fcache-agent exited with status %s on '
                                 'SIGTERM; log tail:\n%s' % (
                                     rc, self.run_log()[-6000:]))
        return rc

    def kill(self, timeout=10):
        """Crash: SIGKILL and reap."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout)

    def restart(self):
        self.stop()
        return self.start()

    def assert_alive(self):
        if not self.running:
            raise AssertionError('fcache-agent died (status %s); log tail:\n%s'
                                 % (self.proc.returncode,
                                    self.run_log()[-6000:]))
        self.client().status()

    # -- logs -------------------------------------------------------------

    def log(self):
        try:
            with open(self.logfile, 'r', errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def run_log(self):
        """The log of the current (or last) run only."""
        try:
            with open(self.logfile, 'rb') as f:
                f.seek(getattr(self, '_run_log_start', 0))
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''

    def sanitizer_reports(self):
        return sanitizer_reports(self.log())

    # -- control ----------------------------------------------------------

    def client(self, timeout=30, unchecked=False):
        """An AgentClient (``unchecked``: an UncheckedClient)."""
        cls = UncheckedClient if unchecked else agent_mod.AgentClient
        return cls(self.control_socket, timeout=timeout)

    def attach(self, volume_id, origin, cache_size=None, write_policy=None,
               admission=None, **policy):
        return self.client().attach_volume(volume_id, origin,
                                           cache_size=cache_size,
                                           write_policy=write_policy,
                                           admission=admission, **policy)

    def show(self, volume_id):
        return self.client().show_volume(volume_id)

    def status(self):
        return self.client().status()

    def detach(self, volume_id):
        return self.client().detach_volume(volume_id)

    def raw_control(self, data, timeout=10, expect_close=False):
        """Send raw bytes on a new control connection; return the replies.

        Reads until every request line got its answer (one per newline in
        ``data``, at least one) or the agent closes the connection.
        """
        want = max(1, data.count(b'\n'))
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.control_socket)
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                pass
            if not data.endswith(b'\n'):
                s.shutdown(socket.SHUT_WR)
            buf = b''
            closed = False
            while buf.count(b'\n') < want or expect_close:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    chunk = b''
                if not chunk:
                    closed = True
                    break
                buf += chunk
        finally:
            s.close()
        replies = [json.loads(line) for line in buf.split(b'\n') if line]
        return replies, closed


def ensure_asan_agent(tmpdir):
    """Build the ASan agent if needed; return a private copy's path.

    The copy keeps a concurrent rebuild of fcache_agent/build from changing
    the binary under a running test session, and its name (not
    "fcache-agent") keeps a "pkill fcache-agent" run by someone else on a
    shared machine from hitting the tests' agents.  FCACHE_AGENT_BIN names
    another binary to test (it is copied too).
    """
    src = os.environ.get('FCACHE_AGENT_BIN')
    if not src:
        src = ASAN_AGENT
        r = subprocess.run(['make', '-s', '-C', AGENT_DIR, 'asan'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600)
        if r.returncode != 0 and not os.path.exists(ASAN_AGENT):
            raise AssertionError('cannot build the ASan agent:\n%s' %
                                 r.stdout.decode(errors='replace')[-4000:])
        if r.returncode != 0:
            import warnings
            warnings.warn('make asan failed; using the existing %s:\n%s' % (
                ASAN_AGENT, r.stdout.decode(errors='replace')[-2000:]))
    dest = os.path.join(tmpdir, 'fcft-agent')
    shutil.copy2(src, dest)
    return dest


def control_error_text(exc):
    return getattr(exc, 'error', None) or str(exc)


def grep(text, pattern):
    return [ln for ln in text.splitlines() if re.search(pattern, ln)]
