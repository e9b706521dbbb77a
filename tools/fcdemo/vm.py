# SPDX-License-Identifier: Apache-2.0
"""A "VM" of the testbed: a running ``vmload`` driven through its stdin.

vmload (fcache_agent/tools/vmload.c, doc/research/vmload.rst) issues fio's
Figure-5 job over NBD, prints one JSON line per second and obeys ``pause``,
``switch URI``, ``resume``, ``stats`` and ``quit``: what a VM's disk sees
during a live migration.  This class starts it under the Lab (so it is
stopped with everything else), stamps every per-second line with the
host's monotonic clock when it arrives (so lines of several VMs can be put
on one time axis) and turns the command protocol into method calls.
"""

import json
import os
import queue
import subprocess
import threading
import time

from fcdemo import lab as L

VMLOAD_BIN = os.environ.get('FCACHE_VMLOAD_BIN') or os.path.join(
    L.REPO, 'fcache_agent', 'build', 'vmload')


class VmError(L.LabError):
    """vmload refused a command, died, or found bad data."""


class Vm(object):
    """One vmload process.  ``samples`` holds its per-second lines."""

    def __init__(self, lab, name, uri, size_per_job, jobs=4, iodepth=32,
                 seed=None, extra=()):
        if not os.access(VMLOAD_BIN, os.X_OK):
            raise L.LabError('%s is missing: run tools/setup.sh (or make -C '
                             'fcache_agent)' % VMLOAD_BIN)
        self.name = name
        self.samples = []        # dicts of vmload's JSON line + 'mono'
        self.stats_lines = []
        self._answers = queue.Queue()
        self._lock = threading.Lock()
        argv = [VMLOAD_BIN, '--uri', uri, '--json', '--verify',
                '--jobs', str(jobs), '--iodepth', str(iodepth),
                '--size', str(size_per_job)]
        if seed is not None:
            argv += ['--seed', str(seed)]
        argv += list(extra)
        lab.note(name, argv)
        self.err_path = os.path.join(lab.workdir, '%s.err' % name)
        with open(self.err_path, 'wb') as errf:
            popen = subprocess.Popen(
                L._pdeathsig_prefix() + argv, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=errf, start_new_session=True,
                universal_newlines=True, bufsize=1)
        self.t0 = time.monotonic()
        self.proc = L.Proc(name, popen, self.err_path, argv)
        lab.procs.append(self.proc)
        self._lab = lab
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- output --------------------------------------------------------------

    def _read(self):
        for line in self.proc.popen.stdout:
            now = time.monotonic()
            line = line.rstrip('\n')
            if line.startswith('{'):
                try:
                    obj = json.loads(line)
                except ValueError:
                    self._answers.put('error unparsable line %r' % line)
                    continue
                obj['mono'] = now
                with self._lock:
                    (self.samples if 't' in obj
                     else self.stats_lines).append(obj)
            elif line.startswith(('ok ', 'error ')):
                self._answers.put(line)
        self._answers.put(None)

    def series(self, since=None, until=None):
        """Per-second lines whose arrival lies in [since, until)."""
        with self._lock:
            return [s for s in self.samples
                    if (since is None or s['mono'] >= since) and
                    (until is None or s['mono'] < until)]

    def stderr_tail(self):
        return L.tail(self.err_path, 12)

    # -- commands ------------------------------------------------------------

    def command(self, cmd, timeout=60):
        if self.proc.popen.poll() is not None:
            raise VmError('%s exited (status %s) before %r:\n%s'
                          % (self.name, self.proc.popen.returncode, cmd,
                             self.stderr_tail()))
        self.proc.popen.stdin.write(cmd + '\n')
        self.proc.popen.stdin.flush()
        try:
            ans = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise VmError('%s: no answer to %r within %d s'
                          % (self.name, cmd, timeout))
        if ans is None:
            raise VmError('%s exited during %r:\n%s'
                          % (self.name, cmd, self.stderr_tail()))
        if not ans.startswith('ok '):
            raise VmError('%s: %r -> %s' % (self.name, cmd, ans))
        return ans

    @staticmethod
    def _ms(ans):
        return float(ans.rsplit('=', 1)[1])

    def pause(self):
        """Stop issuing and drain; returns the drain time in ms."""
        return self._ms(self.command('pause'))

    def switch(self, uri):
        self.command('switch %s' % uri)

    def resume(self):
        """Run again; returns the paused time (the guest's downtime), ms."""
        return self._ms(self.command('resume'))

    def stats(self):
        n = len(self.stats_lines)
        self.command('stats')
        if len(self.stats_lines) != n + 1:
            raise VmError('%s: no stats line before "ok stats"' % self.name)
        return self.stats_lines[-1]

    def quit(self, timeout=60):
        """Stop, check the exit status; returns the final stats line."""
        n = len(self.stats_lines)
        self.command('quit', timeout)
        try:
            rc = self.proc.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise VmError('%s did not exit after quit' % self.name)
        self._reader.join(5)
        if self.proc in self._lab.procs:
            self._lab.procs.remove(self.proc)
        if len(self.stats_lines) != n + 1:
            raise VmError('%s: no final stats line' % self.name)
        final = self.stats_lines[-1]
        final['exit_status'] = rc
        return final


def check_clean(vm, final):
    """The oracle's verdict: every checked read matched, nothing failed."""
    if final['exit_status'] != 0 or final['errors'] or final['mismatches']:
        raise VmError('%s lost or corrupted data: exit status %s, %d failed '
                      'requests, %d mismatching reads:\n%s'
                      % (vm.name, final['exit_status'], final['errors'],
                         final['mismatches'], vm.stderr_tail()))
