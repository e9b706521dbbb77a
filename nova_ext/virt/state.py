# SPDX-License-Identifier: Apache-2.0
"""What one nova-compute knows about cache migrations in flight.

nova-compute runs each live migration in its own thread (native threads by
default in Nova 34): every access goes through one lock.  The state is in
memory only: a restarted nova-compute fails its in-flight migrations
anyway, and the agents keep the authoritative record (``migration-status``;
their volumes carry an ``in:``/``out:`` mark on disk).
"""

import threading


class Incoming(object):
    """The destination's view: volumes prepared for one instance."""

    def __init__(self, source_host, sources):
        self.source_host = source_host
        self.sources = sources  # volume_id -> the source's fcache_source
        self.volumes = {}      # volume_id -> prepare_destination() result


class Registry(object):

    def __init__(self):
        self._lock = threading.Lock()
        self._incoming = {}    # instance uuid -> Incoming

    def begin_incoming(self, instance_uuid, source_host, sources):
        with self._lock:
            self._incoming[instance_uuid] = Incoming(source_host, sources)

    def incoming(self, instance_uuid):
        with self._lock:
            return self._incoming.get(instance_uuid)

    def add_prepared(self, instance_uuid, volume_id, prepared):
        with self._lock:
            self._incoming[instance_uuid].volumes[volume_id] = prepared

    def pop_prepared(self, instance_uuid, volume_id):
        """Forget and return one prepared volume (None if not prepared)."""
        with self._lock:
            inc = self._incoming.get(instance_uuid)
            if inc is None:
                return None, None
            return inc.source_host, inc.volumes.pop(volume_id, None)

    def end_incoming(self, instance_uuid):
        """Forget the instance; return what was still prepared."""
        with self._lock:
            return self._incoming.pop(instance_uuid, None)
