# SPDX-License-Identifier: Apache-2.0
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

import ctypes
import glob
import os
import shlex
import signal
import struct
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


# linux.uml 6.1 saves a guest's FPU state with PTRACE_GETREGSET
# NT_X86_XSTATE into a buffer of its own size once that call works, and
# restores it with PTRACE_SETREGSET, which the host refuses (EFAULT) unless
# the buffer is exactly the host's whole XSAVE size: on a host whose XSAVE
# area outgrew it (AMX's tiles, 11 KiB) the first guest process dies with
# "userspace - ptrace set fp regs failed, errno = 14" and init panics.
# Refusing that one GETREGSET (EIO, as a host without XSAVE answers) makes
# linux.uml keep to PTRACE_GETFPREGS/SETFPREGS, the legacy 512-byte area,
# which any host takes.  That area has no AVX upper halves, so the guest's
# glibc, GnuTLS and OpenSSL are told to use nothing beyond SSE
# (GUEST_CPU_ENV).
_PTRACE_GETREGSET = 0x4204
_NT_X86_XSTATE = 0x202
_NR_PTRACE = 101
_AUDIT_ARCH_X86_64 = 0xc000003e
_SECCOMP_RET_ALLOW = 0x7fff0000
_SECCOMP_RET_ERRNO = 0x00050000
_EIO = 5
GUEST_CPU_ENV = {
    'GLIBC_TUNABLES': 'glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,'
                      '-AVX512BW,-AVX512DQ,-AVX512CD,-AVX_Fast_Unaligned_Load',
    'GNUTLS_CPUID_OVERRIDE': '0x1',
    # OpenSSL (Python's hashlib): no AVX (bit 60), no OSXSAVE (bit 59).
    'OPENSSL_ia32cap': '~0x1800000000000000',
}


def _bpf(code, jt, jf, k):
    return struct.pack('HBBI', code, jt, jf, k)


def _no_xstate_regset():
    """preexec_fn: refuse ptrace(GETREGSET, NT_X86_XSTATE) with EIO."""
    ld_w_abs, jeq_k, ret_k = 0x20, 0x15, 0x06
    prog = b''.join([
        _bpf(ld_w_abs, 0, 0, 4),                         # arch
        _bpf(jeq_k, 0, 7, _AUDIT_ARCH_X86_64),
        _bpf(ld_w_abs, 0, 0, 0),                         # nr
        _bpf(jeq_k, 0, 5, _NR_PTRACE),
        _bpf(ld_w_abs, 0, 0, 16),                        # args[0]: request
        _bpf(jeq_k, 0, 3, _PTRACE_GETREGSET),
        _bpf(ld_w_abs, 0, 0, 32),                        # args[2]: note type
        _bpf(jeq_k, 0, 1, _NT_X86_XSTATE),
        _bpf(ret_k, 0, 0, _SECCOMP_RET_ERRNO | _EIO),
        _bpf(ret_k, 0, 0, _SECCOMP_RET_ALLOW),
    ])
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack('HxxxxxxQ', len(prog) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0 or libc.prctl(
            pr_set_seccomp, seccomp_mode_filter, ctypes.addressof(fbuf),
            0, 0) != 0:
        os.write(2, b'umlvm: cannot install the seccomp filter: %s\n'
                 % os.strerror(ctypes.get_errno()).encode())
        os._exit(126)


class Result(object):
    def __init__(self, rc, output, console, elapsed):
        self.rc = rc
        self.output = output
        self.console = console
        self.elapsed = elapsed

    def __repr__(self):
        return 'Result(rc=%r, %.1f s)' % (self.rc, self.elapsed)


def module_paths(extra=()):
    """The .ko files to insmod (MODULES, then ``extra``), in load order.

    UmlError if one is missing.
    """
    versions = sorted(os.listdir(MODULE_ROOT)) if os.path.isdir(
        MODULE_ROOT) else []
    if not versions:
        raise UmlError('no UML modules under %s: install the Debian package '
                       'user-mode-linux (tools/setup.sh)' % MODULE_ROOT)
    base = os.path.join(MODULE_ROOT, versions[-1])
    paths = []
    for m in MODULES + tuple(extra):
        found = glob.glob(os.path.join(base, '**', m + '.ko'), recursive=True)
        if not found:
            raise UmlError('UML module %s.ko not found under %s' % (m, base))
        paths.append(found[0])
    return paths


def kernel_version():
    return sorted(os.listdir(MODULE_ROOT))[-1]


INIT = r"""#!/bin/sh
# PID 1 inside UML: written by fcache_testkit/uml/umlvm.py.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
# Nothing beyond SSE in the guest's processes (see GUEST_CPU_ENV).
export {cpu_env}
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
    """One UML guest: disks in ``workdir``, booted per ``run()``.

    ``modules``: more module names to load after MODULES, in order (each
    after its dependencies), e.g. ``('loop', 'md-mod', 'raid1')``.
    """

    def __init__(self, workdir, disks=(), mem='768M', modules=()):
        self.workdir = os.path.abspath(workdir)
        self.disks = list(disks)
        self.mem = mem
        self.modules = tuple(modules)
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
                cpu_env=' '.join('%s=%s' % (k, shlex.quote(v))
                                 for k, v in sorted(GUEST_CPU_ENV.items())),
                modules=' '.join(shlex.quote(p)
                                 for p in module_paths(self.modules)),
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
                                    start_new_session=True,
                                    preexec_fn=_no_xstate_regset)
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
    """``python3 -m fcache_testkit.uml.umlvm WORKDIR 'command'``: by hand."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    vm = UmlVM(argv[0], disks=[('origin', 64 << 20), ('flash_a', 48 << 20),
                               ('flash_b', 48 << 20)])
    res = vm.run(argv[1])
    sys.stdout.write(res.output)
    return res.rc


if __name__ == '__main__':
    raise SystemExit(main())
