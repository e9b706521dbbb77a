# SPDX-License-Identifier: Apache-2.0
"""A TCP forwarder whose link the test can cut: the migration network.

The source agent connects to the destination agent's migration listener
through it (the destination advertises the proxy as its
``[fcache] migration_address``).  :meth:`TcpProxy.cut` breaks every
forwarded stream at once, as a failed switch or cable would: both agents
see their stream end.
"""

import socket
import threading


class TcpProxy(object):

    def __init__(self, target):
        host, _, port = target.rpartition(':')
        self.target = (host, int(port))
        self._listener = socket.create_server(('127.0.0.1', 0))
        self.address = '127.0.0.1:%d' % self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._streams = []
        self.connections = 0
        # Set by cut(down=True): the link stays down, new connections are
        # closed at once.
        self.down = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.connections += 1
                self._streams += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b),
                                 daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(1 << 16)
                if not data:
                    break
                b.sendall(data)
        except (OSError, EOFError):
            # EOFError: eventlet's, for a socket closed under the pump.
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self, down=False):
        """End every forwarded stream, both directions.

        ``down``: and close every later connection too, until the end.
        """
        self.down = self.down or down
        with self._lock:
            streams = list(self._streams)
        for s in streams:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._thread.join(5)
        self.cut()
        with self._lock:
            for s in self._streams:
                s.close()
