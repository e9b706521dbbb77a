"""Boot user-mode-linux with the host's / as root and run one command in it.

The kernel is Debian's ``linux.uml`` (package ``user-mode-linux``); its
device-mapper targets are modules under /usr/lib/uml/modules/<version>/,
loaded with insmod by the init script written here.  The guest sees the
host's filesystem through hostfs, so the agent binary, python3 and the
test scripts run inside it unchanged; block devices are ubd disks backed by
sparse files in the work directory (``/dev/ubda``, ``/dev/ubdb``, ... in
the order given).

``run()`` always stops the guest: the init script halts it when the command
ends, and a guest still running at the timeout is killed with its whole
process group (linux.uml forks helper processes), so nothing is left behind.
The command's output and exit status come back through files in the work
directory (hostfs), not through the console, which also carries the
kernel's messages.

Usage::

    vm = UmlVM(workdir, disks=[('origin', 64 << 20), ('flash_a', 32 << 20)])
    res = vm.run('python3 guest/check.py', timeout=120)
    res.rc, res.output, res.console
"""

import glob
import os
import shlex
import signal
import subprocess
import time

LINUX = '/usr/bin/linux.uml'
MODULE_ROOT = '/usr/lib/uml/modules'
# Load order matters: each module's dependencies come before it.
MODULES = ('dm-mod', 'dm-bufio', 'dm-bio-prison', 'dm-persistent-data',
           'dm-cache', 'dm-cache-smq', 'dm-era', 'dm-flakey', 'dm-delay',
           'dm-clone')


class UmlError(AssertionError):
    pass


class Result(object):
    def __init__(self, rc, output, console, elapsed):
        self.rc = rc
        self.output = output
        self.console = console
        self.elapsed = elapsed

    def __repr__(self):
        return 'Result(rc=%r, %.1f s)' % (self.rc, self.elapsed)


def module_paths():
    """The .ko files to insmod, in load order; UmlError if one is missing."""
    versions = sorted(os.listdir(MODULE_ROOT)) if os.path.isdir(
        MODULE_ROOT) else []
    if not versions:
        raise UmlError('no UML modules under %s: install the Debian package '
                       'user-mode-linux (tools/setup.sh)' % MODULE_ROOT)
    base = os.path.join(MODULE_ROOT, versions[-1])
    paths = []
    for m in MODULES:
        found = glob.glob(os.path.join(base, '**', m + '.ko'), recursive=True)
        if not found:
            raise UmlError('UML module %s.ko not found under %s' % (m, base))
        paths.append(found[0])
    return paths


def kernel_version():
    return sorted(os.listdir(MODULE_ROOT))[-1]


INIT = r"""#!/bin/sh
# PID 1 inside UML: written by tests/uml/umlvm.py.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
# No udev in the guest: libdevmapper makes the /dev/mapper nodes itself.
export DM_DISABLE_UDEV=1
mount -t proc proc /proc
mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
# Sockets and runtime files live on a tmpfs: unix sockets on hostfs would
# be host files the guest cannot connect through.
mount -t tmpfs -o size=64m tmpfs {rt}
# Loopback for the agents' migration listeners (127.0.0.1).
ip link set lo up 2>/dev/null || ifconfig lo up
{{
  for m in {modules}; do insmod "$m" || echo "umlvm: insmod $m failed"; done
  ln -sf /proc/self/fd /dev/fd 2>/dev/null
  cd {cwd}
  {env} sh -c {cmd}
  echo $? > {rcfile}.tmp
}} > {outfile} 2>&1
sync
mv {rcfile}.tmp {rcfile}
sync
halt -f
"""


class UmlVM(object):
    """One UML guest: disks in ``workdir``, booted per ``run()``."""

    def __init__(self, workdir, disks=(), mem='768M'):
        self.workdir = os.path.abspath(workdir)
        self.disks = list(disks)
        self.mem = mem
        os.makedirs(self.workdir, exist_ok=True)
        self.rt = os.path.join(self.workdir, 'rt')
        os.makedirs(self.rt, exist_ok=True)
        self.devices = {}
        for i, (name, size) in enumerate(self.disks):
            path = self.disk_path(name)
            if not os.path.exists(path):
                with open(path, 'wb') as f:
                    f.truncate(size)
            self.devices[name] = '/dev/ubd%s' % chr(ord('a') + i)

    def disk_path(self, name):
        return os.path.join(self.workdir, name + '.img')

    def run(self, command, timeout=300, env=None, cwd=None):
        """Boot, run ``command`` with sh, halt.  Returns a Result."""
        out = os.path.join(self.workdir, 'guest.out')
        rcfile = os.path.join(self.workdir, 'guest.rc')
        console = os.path.join(self.workdir, 'console.log')
        for p in (out, rcfile, rcfile + '.tmp'):
            if os.path.exists(p):
                os.unlink(p)
        genv = {'UML_RT': self.rt, 'UML_WORK': self.workdir}
        for name, dev in self.devices.items():
            genv['DEV_' + name.upper()] = dev
        genv.update(env or {})
        init = os.path.join(self.workdir, 'init.sh')
        with open(init, 'w') as f:
            f.write(INIT.format(
                rt=shlex.quote(self.rt),
                modules=' '.join(shlex.quote(p) for p in module_paths()),
                cwd=shlex.quote(cwd or os.getcwd()),
                env=' '.join('%s=%s' % (k, shlex.quote(v))
                             for k, v in sorted(genv.items())),
                cmd=shlex.quote(command),
                rcfile=shlex.quote(rcfile), outfile=shlex.quote(out)))
        os.chmod(init, 0o755)
        args = [LINUX, 'mem=' + self.mem, 'rootfstype=hostfs', 'rootflags=/',
                'rw', 'init=' + init, 'con=null', 'con0=fd:0,fd:1',
                'uml_dir=' + self.workdir, 'umid=fcache-uml']
        for i, (name, _) in enumerate(self.disks):
            args.append('ubd%d=%s' % (i, self.disk_path(name)))
        t0 = time.monotonic()
        with open(console, 'wb') as log:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
            finally:
                # linux.uml forks helpers into its session: end them all.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        elapsed = time.monotonic() - t0
        with open(console, 'rb') as f:
            cons = f.read().decode('utf-8', 'replace')
        output = ''
        if os.path.exists(out):
            with open(out, 'rb') as f:
                output = f.read().decode('utf-8', 'replace')
        if not os.path.exists(rcfile):
            raise UmlError('UML guest did not finish within %d s (or crashed)'
                           '\n--- output ---\n%s\n--- console tail ---\n%s' % (
                               timeout, output[-4000:], cons[-3000:]))
        with open(rcfile) as f:
            rc = int(f.read().strip() or '-1')
        return Result(rc, output, cons, elapsed)


def main(argv=None):
    """``python3 tests/uml/umlvm.py WORKDIR 'command'``: a manual run."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    vm = UmlVM(argv[0], disks=[('origin', 64 << 20), ('flash_a', 48 << 20),
                               ('flash_b', 48 << 20)])
    res = vm.run(argv[1])
    sys.stdout.write(res.output)
    return res.rc


if __name__ == '__main__':
    raise SystemExit(main())
