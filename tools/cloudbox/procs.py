# SPDX-License-Identifier: Apache-2.0
"""The box's daemons: started in sessions of their own, found again by
pid file, stopped by process group.

A pid file holds the pid and the process's start time (field 22 of
/proc/PID/stat): ``down`` and ``status`` never signal a process that
merely reuses the number of one the box started.
"""

import os
import signal
import socket
import subprocess
import time


class BoxError(Exception):
    """Something the operator must look at: the message says what."""


def _start_time(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after it.
    fields = stat[stat.rindex(')') + 2:].split()
    if fields[0] == 'Z':
        return None
    return fields[19]


def _pid_file(box, name):
    return os.path.join(box.run, name + '.pid')


def pid_of(box, name):
    """The pid of the box's daemon ``name`` if it runs, else None."""
    try:
        with open(_pid_file(box, name)) as f:
            pid, started = f.read().split()
        pid = int(pid)
    except (OSError, ValueError):
        return None
    return pid if _start_time(pid) == started else None


def names(box):
    try:
        return sorted(f[:-4] for f in os.listdir(box.run)
                      if f.endswith('.pid'))
    except FileNotFoundError:
        return []


def tail(path, lines=25):
    try:
        with open(path, errors='replace') as f:
            text = f.read()[-20000:]
    except OSError:
        return '(no log at %s)' % path
    return '\n'.join('  ' + line for line in
                     text.splitlines()[-lines:])


def start(box, name, argv, env=None, netns=None, cwd=None):
    """Start ``argv`` as daemon ``name`` unless it runs; return its pid."""
    pid = pid_of(box, name)
    if pid:
        return pid
    if netns:
        argv = ['ip', 'netns', 'exec', netns] + list(argv)
    full_env = dict(os.environ)
    full_env.update(env or {})
    log = box.log(name)
    with open(log, 'ab') as out:
        out.write(('--- %s: %s\n' % (time.strftime('%F %T'),
                                     ' '.join(argv))).encode())
        out.flush()
        proc = subprocess.Popen(argv, stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL, env=full_env,
                                cwd=cwd or box.dir, start_new_session=True)
    started = None
    for _ in range(50):
        started = _start_time(proc.pid)
        if started:
            break
        time.sleep(0.01)
    if started is None:
        raise BoxError('%s exited at once (status %s); its log %s:\n%s'
                       % (name, proc.poll(), log, tail(log)))
    with open(_pid_file(box, name), 'w') as f:
        f.write('%d %s\n' % (proc.pid, started))
    return proc.pid


def stop(box, name, timeout=20):
    """SIGTERM the daemon's process group, SIGKILL it after ``timeout``."""
    pid = pid_of(box, name)
    if pid:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while pid_of(box, name) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if pid_of(box, name):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _reap(pid)
    try:
        os.unlink(_pid_file(box, name))
    except FileNotFoundError:
        pass


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_for(check, timeout, what, box=None, name=None):
    """Poll ``check()`` until truthy; else BoxError naming the log."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except Exception as exc:      # a service still starting
            result = None
            last = exc
        else:
            last = None
        if result:
            return result
        if box is not None and name is not None and not pid_of(box, name):
            raise BoxError('%s exited while waiting for %s; its log %s:\n%s'
                           % (name, what, box.log(name),
                              tail(box.log(name))))
        if time.monotonic() > deadline:
            msg = 'no %s within %d s' % (what, timeout)
            if last is not None:
                msg += ' (last error: %s)' % last
            if box is not None and name is not None:
                msg += '; the log %s:\n%s' % (box.log(name),
                                              tail(box.log(name)))
            raise BoxError(msg)
        time.sleep(0.2)


def port_open(host, port):
    with socket.socket() as s:
        s.settimeout(1)
        try:
            s.connect((host, port))
        except OSError:
            return False
        return True


def run(argv, what, env=None, netns=None, log=None, timeout=600):
    """Run a setup command; BoxError with its output if it fails."""
    if netns:
        argv = ['ip', 'netns', 'exec', netns] + list(argv)
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(argv, capture_output=True, text=True, env=full_env,
                          timeout=timeout)
    if log:
        with open(log, 'a') as f:
            f.write('--- %s\n%s%s' % (' '.join(argv), proc.stdout,
                                      proc.stderr))
    if proc.returncode != 0:
        raise BoxError('%s failed (%s, exit status %d):\n%s' % (
            what, ' '.join(argv), proc.returncode,
            '\n'.join('  ' + line for line in
                      (proc.stdout + proc.stderr).splitlines()[-25:])))
    return proc.stdout
