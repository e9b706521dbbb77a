# SPDX-License-Identifier: Apache-2.0
"""Start, watch and always stop the real programs a demo or benchmark uses.

Every child runs in its own session (process group) so that it can be
stopped as a whole, and so that a Ctrl-C in the terminal reaches only this
Python process, which then stops the children itself in order (agent with
SIGTERM for a clean shutdown, then the NBD servers).  nbdkit also gets
--exit-with-parent, so it cannot outlive us even after a SIGKILL.
"""

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from nova_ext.agent import AgentClient  # noqa: E402

# FCACHE_AGENT_BIN selects another build (e.g. a copy kept aside while the
# tree is being rebuilt).
AGENT_BIN = os.environ.get('FCACHE_AGENT_BIN') or os.path.join(
    REPO, 'fcache_agent', 'build', 'fcache-agent')
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# fio forks a process per job and each calls setsid(), so one fio run of N
# jobs is N kernel sessions where QEMU's N connections are one.  An agent
# whose export multi-job fio drives must serve any session (the default,
# export_clients = session, pins an export to its first client's session).
FIO_AGENT_KEYS = {'export_clients': 'any'}


class LabError(Exception):
    """Something the demo or benchmark needs did not work."""


def tail(path, lines=25):
    try:
        with open(path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode('utf-8', 'replace')
    except OSError as exc:
        return '(cannot read %s: %s)' % (path, exc)
    return '\n'.join(text.splitlines()[-lines:])


def cmdline(argv):
    return ' '.join(shlex.quote(str(a)) for a in argv)


def _connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]
    finally:
        s.close()


def _pdeathsig_prefix():
    # A child whose parent dies (even by SIGKILL) gets SIGTERM: nothing is
    # left running after the demo.  nbdkit has --exit-with-parent itself.
    path = shutil.which('setpriv')
    return [path, '--pdeathsig', 'TERM'] if path else []


def nbd_uri(sock):
    return 'nbd+unix:///?socket=%s' % sock


class Terminated(SystemExit):
    """SIGTERM or SIGHUP arrived; the children are stopped on the way out."""


def _raise_exit(signum, frame):
    # Turn SIGTERM/SIGHUP into an exception so that every `finally` runs.
    raise Terminated(128 + signum)


class Proc(object):
    def __init__(self, name, popen, log, argv):
        self.name = name
        self.popen = popen
        self.log = log
        self.argv = argv

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def cpu_seconds(self):
        """User + system CPU time of all the process's threads so far."""
        with open('/proc/%d/stat' % self.pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        # fields[0] is field 3 (state); utime and stime are fields 14, 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')

    def rss_bytes(self):
        """VmRSS of the process, in bytes."""
        with open('/proc/%d/status' % self.pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1]) * 1024
        raise LabError('no VmRSS for %s (pid %d)' % (self.name, self.pid))


class Agent(object):
    def __init__(self, proc, conf, conf_path):
        self.proc = proc
        self.conf = conf
        self.conf_path = conf_path
        self.client = AgentClient(conf['control_socket'], timeout=60)

    @property
    def state_dir(self):
        return self.conf['state_dir']


class Lab(object):
    """Owns the child processes of one run; use as a context manager."""

    def __init__(self, workdir, verbose=False):
        self.workdir = workdir
        self.verbose = verbose
        self.procs = []
        self.commands = []      # (what, command line) for the report
        self._old = {}
        os.makedirs(workdir, exist_ok=True)

    # -- life cycle ---------------------------------------------------------

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old[sig] = signal.signal(sig, _raise_exit)
        return self

    def __exit__(self, *exc):
        self.close()
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False

    def note(self, what, argv):
        line = argv if isinstance(argv, str) else cmdline(argv)
        self.commands.append((what, line))
        if self.verbose:
            print('  $ %s' % line, flush=True)

    def start(self, name, argv, log=None):
        log = log or os.path.join(self.workdir, '%s.log' % name)
        self.note(name, argv)
        with open(log, 'ab') as logf:
            popen = subprocess.Popen(_pdeathsig_prefix() + list(argv),
                                     stdin=subprocess.DEVNULL,
                                     stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        proc = Proc(name, popen, log, argv)
        self.procs.append(proc)
        return proc

    def stop(self, proc, timeout=15):
        if proc in self.procs:
            self.procs.remove(proc)
        if proc.popen.poll() is not None:
            return proc.popen.returncode
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            return proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            print('warning: %s (pid %d) ignored SIGTERM for %d s; killing it'
                  % (proc.name, proc.pid, timeout), file=sys.stderr)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return proc.popen.wait()

    def close(self):
        while self.procs:
            self.stop(self.procs[-1])

    def wait_socket(self, proc, path, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not proc.alive():
                raise LabError('%s exited with status %s before opening %s;'
                               ' last lines of %s:\n%s'
                               % (proc.name, proc.popen.returncode, path,
                                  proc.log, tail(proc.log)))
            if os.path.exists(path) and _connectable(path):
                return
            time.sleep(0.05)
        raise LabError('%s did not open %s within %d s; last lines of %s:\n%s'
                       % (proc.name, path, timeout, proc.log, tail(proc.log)))

    # -- servers ------------------------------------------------------------

    def nbdkit(self, name, plugin_args, filters=(), threads=None,
               readonly=False, env=None):
        """Serve plugin_args (e.g. ['file', PATH]) on a unix socket.

        filters: filter names; their parameters go in plugin_args.
        Returns (proc, uri).
        """
        sock = os.path.join(self.workdir, '%s.sock' % name)
        if os.path.exists(sock):
            os.unlink(sock)
        argv = ['nbdkit', '-f', '--exit-with-parent', '-U', sock]
        if threads:
            argv += ['-t', str(threads)]
        if readonly:
            argv.append('-r')
        argv += ['--filter=%s' % f for f in filters]
        argv += list(plugin_args)
        if env:
            env_prefix = ['env'] + ['%s=%s' % kv for kv in sorted(env.items())]
            argv = env_prefix + argv
        proc = self.start(name, argv)
        self.wait_socket(proc, sock)
        return proc, nbd_uri(sock)

    def agent(self, name, cache_size, **keys):
        """Start an fcache-agent with its files under workdir/name."""
        if not os.access(AGENT_BIN, os.X_OK):
            raise LabError('%s is missing: run tools/setup.sh (or make -C '
                           'fcache_agent)' % AGENT_BIN)
        base = os.path.join(self.workdir, name)
        conf = {
            'control_socket': os.path.join(base, 'agent.sock'),
            'state_dir': os.path.join(base, 'state'),
            'cache_path': os.path.join(base, 'cache.img'),
            'cache_size': str(cache_size),
            'export_dir': os.path.join(base, 'exports'),
            'migration_listen': '127.0.0.1:%d' % _free_port(),
            'log_level': 'info',
            # The lab's origins (files, nbdkit sockets) live in its work
            # directory: only there may the agent open them.
            'origin_prefixes': os.path.join(self.workdir, ''),
        }
        conf.update({k: str(v) for k, v in keys.items()})
        for d in (base, conf['state_dir'], conf['export_dir']):
            os.makedirs(d, exist_ok=True)
        conf_path = os.path.join(base, 'agent.conf')
        with open(conf_path, 'w') as f:
            f.write('[agent]\n')
            for k, v in conf.items():
                f.write('%s = %s\n' % (k, v))
        proc = self.start(name, [AGENT_BIN, '--config', conf_path],
                          log=os.path.join(base, 'agent.log'))
        self.wait_socket(proc, conf['control_socket'])
        return Agent(proc, conf, conf_path)

    def agent_error(self, agent, what):
        log = tail(agent.proc.log)
        hint = ''
        if 'received Terminated' in log or 'received Interrupt' in log:
            hint = ('\nnote: the agent was sent SIGTERM/SIGINT by another '
                    'process (not by this script): is something on this '
                    'machine killing fcache-agent processes by name?')
        elif not agent.proc.alive():
            hint = '\nnote: the agent exited with status %s' % (
                agent.proc.popen.returncode,)
        return LabError('%s; last lines of the agent log %s:\n%s%s'
                        % (what, agent.proc.log, log, hint))

    # -- clients ------------------------------------------------------------

    def run(self, what, argv, timeout=600, quiet=False):
        """Run a short-lived command in its own process group."""
        if not quiet:
            self.note(what, argv)
        popen = subprocess.Popen(_pdeathsig_prefix() + list(argv),
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE,
                                 start_new_session=True)
        try:
            out, err = popen.communicate(timeout=timeout)
        except BaseException:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            popen.wait()
            raise
        out = out.decode('utf-8', 'replace')
        err = err.decode('utf-8', 'replace')
        if popen.returncode != 0:
            raise LabError('%s failed (exit status %d): %s\n%s%s'
                           % (what, popen.returncode, cmdline(argv),
                              '\n'.join(out.splitlines()[-15:]),
                              '\n'.join(err.splitlines()[-15:])))
        return out, err

    def fio(self, what, argv, timeout=600, quiet=False):
        """Run fio with --output-format=json and return the parsed report."""
        argv = ['fio', '--output-format=json'] + list(argv)
        out, err = self.run(what, argv, timeout=timeout, quiet=quiet)
        # The nbd engine prints "fio: connected to NBD server" first.
        start = out.find('\n{') + 1 if not out.startswith('{') else 0
        if not out.startswith('{') and start == 0:
            raise LabError('%s: fio printed no JSON report: %s\n%s'
                           % (what, out[-2000:], err[-2000:]))
        try:
            return json.loads(out[start:])
        except ValueError as exc:
            raise LabError('%s: cannot parse fio JSON report (%s): %s'
                           % (what, exc, out[start:start + 500]))


def fio_totals(report):
    """Sum the jobs of a fio JSON report (works with group_reporting)."""
    # With group_reporting, fio sums iops, bw and io_bytes over the jobs,
    # but also job_runtime: use 'elapsed' (wall seconds) for the duration.
    t = {'read_iops': 0.0, 'write_iops': 0.0, 'read_bytes': 0,
         'write_bytes': 0, 'runtime_s': 0.0, 'read_lat_us': None,
         'mb_per_s': 0.0}
    lat = []
    for job in report['jobs']:
        t['read_iops'] += job['read']['iops']
        t['write_iops'] += job['write']['iops']
        t['read_bytes'] += job['read']['io_bytes']
        t['write_bytes'] += job['write']['io_bytes']
        t['mb_per_s'] += (job['read']['bw_bytes'] +
                          job['write']['bw_bytes']) / 1e6
        t['runtime_s'] = max(t['runtime_s'], float(job.get('elapsed', 0)))
        if job['read'].get('lat_ns', {}).get('mean'):
            lat.append(job['read']['lat_ns']['mean'] / 1000.0)
        if job.get('error'):
            raise LabError('fio job %s reported error %s'
                           % (job.get('jobname'), job['error']))
    if lat:
        t['read_lat_us'] = sum(lat) / len(lat)
    return t


def fill(lab, path, offset, length, bs='1M'):
    """Write non-zero, incompressible data to [offset, offset+length)."""
    lab.fio('prefill', ['--name=prefill', '--filename=%s' % path,
                        '--rw=write', '--bs=%s' % bs, '--ioengine=psync',
                        '--offset=%d' % offset, '--size=%d' % length,
                        '--refill_buffers=1', '--end_fsync=0'])


def machine():
    model = '?'
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    model = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemTotal:'):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    uname = os.uname()
    return {'nproc': os.cpu_count(), 'cpu_model': model,
            'mem_bytes': mem, 'kernel': uname.release,
            'fio': _version(['fio', '--version']),
            'nbdkit': _version(['nbdkit', '--version'])}


def invocation(script, argv):
    """The command line that reproduces this run."""
    env = ''
    if os.environ.get('FCACHE_AGENT_BIN'):
        env = 'FCACHE_AGENT_BIN=%s ' % shlex.quote(
            os.environ['FCACHE_AGENT_BIN'])
    return env + cmdline([script] + list(argv))


def agent_build():
    """What was measured: the agent binary and the tree it came from."""
    import hashlib
    out = {'binary': AGENT_BIN,
           # With FCACHE_AGENT_BIN the git state below describes the tree,
           # not necessarily the build that was measured.
           'overridden': bool(os.environ.get('FCACHE_AGENT_BIN'))}
    try:
        with open(AGENT_BIN, 'rb') as f:
            out['sha256'] = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        pass
    try:
        out['git_head'] = subprocess.run(
            ['git', '-C', REPO, 'rev-parse', '--short', 'HEAD'],
            capture_output=True, text=True, timeout=10).stdout.strip()
        status = subprocess.run(
            ['git', '-C', REPO, 'status', '--porcelain', '--', 'fcache_agent'],
            capture_output=True, text=True, timeout=10).stdout
        out['agent_tree_changes'] = len(status.splitlines())
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _version(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return '?'


def parse_size(text):
    """'64M', '1.5GiB', '4096' -> bytes (binary units)."""
    units = {'K': KiB, 'M': MiB, 'G': GiB}
    t = text.strip().upper().rstrip('B').rstrip('I')
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def run_main(main, argv, what):
    """Run a tool's main() and turn how it ended into an exit status.

    Every process a Lab started is stopped on the way out (the Lab is a
    context manager); this only says so, in the tool's own words.
    """
    try:
        return main(argv)
    except Terminated as exc:
        print('\nterminated by a signal; every process the %s started was '
              'stopped' % what, file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print('\ninterrupted; every process the %s started was stopped'
              % what, file=sys.stderr)
        return 130
    except LabError as exc:
        print('%s failed: %s' % (what, exc), file=sys.stderr)
        return 1
