# SPDX-License-Identifier: Apache-2.0
"""A Ceph cluster for a benchmark: tools/ceph-box.sh, driven through a Lab.

One mon and one bluestore OSD on loopback, msgr2 only, cephx, the pool
``volumes`` and the client ``client.cinder`` (see tools/ceph-box.sh).  The
daemons detach from the benchmark (they are not the Lab's children):
:meth:`CephBox.stop` must run on every way out, which the caller's
``try``/``finally`` sees to.

Clients other than the agent (fio's ``rbd`` engine, the ``rbd`` command)
read a ceph.conf given in ``CEPH_CONF``; :meth:`CephBox.client_conf`
writes one per messenger mode, and :meth:`CephBox.check_modes` shows which
mode a client's connections really used (librados' ``debug_ms`` log).
"""

import os
import re

from fcdemo import lab as L

BOX = os.path.join(L.REPO, 'tools', 'ceph-box.sh')
POOL = 'volumes'
USER = 'cinder'

# A connection ready in librados' debug_ms = 1 log:
#   --2- ... conn(0x... 0x... secure :-1 s=READY ...).ready entity=osd.0 ...
_READY = re.compile(r'conn\(\S+ \S+ (crc|secure) :.*\)\.ready '
                    r'entity=(mon|osd)\.')


class CephBox(object):
    """The cluster in ``directory`` (created by :meth:`start`)."""

    def __init__(self, lab, directory, size='4G'):
        self.lab = lab
        self.dir = directory
        self.size = size
        self.env = {}
        self.started = False

    @property
    def conf(self):
        return self.env['CEPH_CONF']

    @property
    def keyring(self):
        return self.env['CEPH_KEYRING_CINDER']

    @property
    def mon_host(self):
        return self.env['CEPH_MON_HOST']

    def start(self):
        self.started = True     # a failed start stops what it started
        self.lab.run('ceph box', [BOX, 'start', self.dir, self.size],
                     timeout=180)
        out, _ = self.lab.run('ceph box env', [BOX, 'env', self.dir],
                              quiet=True)
        self.env = dict(line.split('=', 1) for line in out.splitlines())
        return self

    def stop(self):
        if self.started:
            self.lab.run('ceph box stop', [BOX, 'stop', self.dir],
                         timeout=120, quiet=True)
            self.started = False

    def agent_uri(self, image):
        """The agent's origin for image: QEMU's rbd: syntax, ':' escaped."""
        opts = [('id', USER), ('keyring', self.keyring),
                ('mon_host', self.mon_host)]
        return 'rbd:%s/%s%s' % (POOL, image, ''.join(
            ':%s=%s' % (k, v.replace(':', '\\:')) for k, v in opts))

    def client_conf(self, name, **options):
        """The box's ceph.conf with options added to [client]; its path.

        Every client gets admin_socket = (none): fio's jobs are processes
        of one client name, which would otherwise all bind one socket.
        """
        options.setdefault('admin_socket', '')
        with open(self.conf) as f:
            text = f.read()
        extra = ''.join('%s = %s\n' % kv for kv in sorted(options.items()))
        if '\n[client]\n' not in text:
            raise L.LabError('%s has no [client] section' % self.conf)
        text = text.replace('\n[client]\n', '\n[client]\n' + extra, 1)
        path = os.path.join(self.lab.workdir, '%s.conf' % name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def rbd(self, what, *args, conf=None):
        """Run the rbd command as client.cinder."""
        return self.lab.run(what, ['rbd', '--conf', conf or self.conf,
                                   '--id', USER] + list(args))

    def check_modes(self, conf, fio_args):
        """The messenger modes of a client's connections, as it logged them.

        Runs fio_args (a short job) with conf plus debug_ms = 1; returns
        {'mon': {'secure'}, 'osd': {'crc'}} or the like.
        """
        log = conf + '.ms.log'
        if os.path.exists(log):
            os.unlink(log)
        with open(conf) as f:
            text = f.read()
        check = conf + '.check'
        with open(check, 'w') as f:
            f.write(text.replace('\n[client]\n', '\n[client]\ndebug_ms = 1\n'
                                 'log_file = %s\n' % log, 1))
        old = os.environ.get('CEPH_CONF')
        os.environ['CEPH_CONF'] = check
        try:
            self.lab.fio('messenger mode check', fio_args, quiet=True)
        finally:
            if old is None:
                del os.environ['CEPH_CONF']
            else:
                os.environ['CEPH_CONF'] = old
        modes = {}
        with open(log, errors='replace') as f:
            for line in f:
                m = _READY.search(line)
                if m:
                    modes.setdefault(m.group(2), set()).add(m.group(1))
        os.unlink(log)
        return {k: sorted(v) for k, v in modes.items()}
