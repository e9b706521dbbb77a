# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the unit tests: a tiny in-process fake of the fcache agent.

The fake speaks the agent's control protocol
(fcache_agent/src/control/control.h) on a real unix socket from a thread,
so the client's socket code runs for real.  It implements just enough of
the operations to check the client and the command line; the real agent is
covered by tests/functional.
"""

import json
import os
import shutil
import socket
import tempfile
import threading

import pytest


class FakeAgentError(Exception):
    """Raised by a handler: the fake answers {"ok": false, ...}."""

    def __init__(self, error, errno):
        super(FakeAgentError, self).__init__(error)
        self.error = error
        self.errno = errno


class FakeAgent(object):
    """Serves the control protocol on ``self.socket_path``.

    ``handlers`` maps op names to ``handler(args) -> result``; a handler
    raises :class:`FakeAgentError` to answer with an error.  Setting
    ``raw_reply`` to bytes makes the fake send exactly those bytes, then
    close, whatever the request; ``busy`` = N makes it refuse the next N
    connections as the agent does past its connection limit.
    ``requests`` records every request received, decoded.
    """

    def __init__(self, directory):
        self.socket_path = os.path.join(directory, 'agent.sock')
        self.requests = []
        self.raw_reply = None
        self.busy = 0
        self.volumes = {}
        self.params = {}
        self.handlers = {
            'agent-status': self._status,
            'volume-attach': self._attach,
            'volume-show': self._show,
            'volume-detach': self._detach,
            'volume-list': self._list,
            'allocation': self._allocation,
        }
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket_path)
        self._listener.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stopping = False

    def start(self):
        self._thread.start()

    def stop(self):
        self._stopping = True
        # Wake accept() up.
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(self.socket_path)
        except OSError:
            pass
        self._thread.join(10)
        self._listener.close()

    # -- server ---------------------------------------------------------

    def _serve(self):
        while True:
            conn, _ = self._listener.accept()
            if self._stopping:
                conn.close()
                return
            with conn:
                conn.settimeout(10)
                try:
                    self._serve_connection(conn)
                except OSError:
                    # The client went away (e.g. after an oversized reply).
                    pass

    def _serve_connection(self, conn):
        reader = conn.makefile('rb')
        for line in reader:
            request = json.loads(line)
            self.requests.append(request)
            if self.raw_reply is not None:
                conn.sendall(self.raw_reply)
                return
            if self.busy:
                # As the agent refuses a connection past its limit.
                self.busy -= 1
                conn.sendall(json.dumps({
                    'ok': False, 'errno': 11, 'busy': True,
                    'error': 'too many control connections (limit 32); '
                             'try again later'}).encode() + b'\n')
                return
            handler = self.handlers.get(request['op'])
            try:
                if handler is None:
                    raise FakeAgentError(
                        'unknown operation %r' % request['op'], 95)
                reply = {'ok': True, 'result': handler(request['args'])}
            except FakeAgentError as exc:
                reply = {'ok': False, 'error': exc.error, 'errno': exc.errno}
            conn.sendall(json.dumps(reply).encode() + b'\n')

    # -- operations -----------------------------------------------------

    def _volume(self, args):
        try:
            return self.volumes[args['volume_id']]
        except KeyError:
            raise FakeAgentError(
                'volume %s is not attached' % args['volume_id'], 2)

    def _status(self, args):
        return {'version': '0.1.0', 'engine': 'ucache',
                'capacity_bytes': 1 << 30,
                'used_bytes': sum(v['cache_size']
                                  for v in self.volumes.values()),
                'volumes': sorted(self.volumes),
                'allocation': self._allocation(args)}

    def _volume_allocation(self, volume_id):
        """A volume's ``allocation`` before its first window closes."""
        size = self.volumes[volume_id].get('cache_size', 64 << 20)
        params = self.params.get(volume_id, {})
        return {'share_bytes': size, 'used_bytes': 0, 'limit_bytes': size,
                'rwss_observed_bytes': None, 'rwss_predicted_bytes': None,
                'prediction_error': None, 'window_s': 3600,
                'rws_n': params.get('rws_n', 1),
                'staging': {'kind': params.get('staging', 'hybrid'),
                            'area_bytes': 1 << 20, 'used_bytes': 0,
                            'addresses': 0, 'data_blocks': 0,
                            'admitted': 0, 'data_hits': 0, 'evicted': 0,
                            'recalled': 0, 'history_blocks': 0,
                            'history_bytes': 0}}

    def _allocation(self, args):
        return {'mode': 'rwss', 'spare': 'proportional', 'window_s': 3600,
                'headroom': 0.1, 'capacity_bytes': 1 << 30,
                'volumes': [dict(self._volume_allocation(vid), id=vid)
                            for vid in sorted(self.volumes)]}

    def _attach(self, args):
        volume_id = args['volume_id']
        if volume_id in self.volumes:
            raise FakeAgentError('volume %s is already attached' % volume_id,
                                 17)
        self.volumes[volume_id] = {
            'volume_id': volume_id,
            'origin': args['origin'],
            'cache_size': args.get('cache_size', 64 << 20),
            'write_policy': args.get('write_policy', 'write_through'),
            'admission': args.get('admission', 'all'),
            'export_uri': 'nbd+unix:///?socket=/run/fcache/exports/%s.sock'
                          % volume_id,
        }
        # Like the agent: RWS_N and the staging kind are reported in the
        # volume's allocation only.
        self.params[volume_id] = {'rws_n': args.get('rws_n', 1),
                                  'staging': args.get('staging', 'hybrid')}
        return {'volume_id': volume_id,
                'export_uri': self.volumes[volume_id]['export_uri']}

    def _show(self, args):
        volume = dict(self._volume(args))
        volume.update(reads=100, writes=25, read_hits=80, read_misses=20,
                      hit_ratio=0.8, cached_blocks=120, dirty_blocks=0,
                      origin_read_bytes=20 * 4096,
                      origin_write_bytes=25 * 4096,
                      cache_write_bytes=45 * 4096, block_size=4096,
                      allocation=self._volume_allocation(args['volume_id']))
        return volume

    def _detach(self, args):
        self._volume(args)
        del self.volumes[args['volume_id']]
        self.params.pop(args['volume_id'], None)
        if args.get('discard_dirty'):
            return {'volume_id': args['volume_id'],
                    'dirty_blocks_dropped': 3}
        return {'volume_id': args['volume_id']}

    def _list(self, args):
        return {'volumes': [dict(v) for v in self.volumes.values()]}


@pytest.fixture
def short_tmpdir():
    """A temporary directory with a path short enough for a unix socket."""
    path = tempfile.mkdtemp(prefix='fcache-')
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_agent(short_tmpdir):
    agent = FakeAgent(short_tmpdir)
    agent.start()
    yield agent
    agent.stop()


@pytest.fixture(autouse=True)
def _no_socket_env(monkeypatch):
    """The tests choose the socket; the caller's $FCACHE_SOCKET must not."""
    monkeypatch.delenv('FCACHE_SOCKET', raising=False)
