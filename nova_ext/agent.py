# SPDX-License-Identifier: Apache-2.0
"""Client of the fcache agent's control socket.

The wire protocol is the agent's (fcache_agent/src/control/control.h): one JSON
object per line on a unix stream socket.

Request::

    {"op": "volume-show", "args": {"volume_id": "..."}}

Response::

    {"ok": true, "result": {...}}
    {"ok": false, "error": "one line an operator can act on", "errno": 22}

The client opens one connection per request, so it needs no locking and
survives agent restarts between calls.
"""

import errno
import json
import logging
import socket
import time

from nova_ext import control_check
from nova_ext import exception
from nova_ext import units
from nova_ext import vocabulary

LOG = logging.getLogger(__name__)

DEFAULT_SOCKET = '/run/fcache/agent.sock'
DEFAULT_TIMEOUT = 30.0

# The agent rejects (and disconnects) requests larger than this.
MAX_REQUEST_BYTES = 64 * units.Ki
# A response larger than this is not something the agent sends.
MAX_RESPONSE_BYTES = 16 * units.Mi

WRITE_POLICIES = vocabulary.WRITE_POLICIES
ADMISSION_POLICIES = vocabulary.ADMISSIONS
# The strategies the agents run, which a hint may name (not ``auto``).
HINT_STRATEGIES = vocabulary.STRATEGIES
RWS_WINDOW_MAX_S = vocabulary.RWS_WINDOW_MAX_S
# What the staging area of admission rws keeps of a block not yet admitted.
STAGING_KINDS = vocabulary.STAGING_KINDS
# Live storage move schemes the agent runs (``auto`` is resolved by the
# caller with nova_ext.movecost) and the states a move goes through.
MOVE_SCHEMES = vocabulary.MOVE_SCHEMES
MOVE_STATES = ('copying', 'switching', 'done', 'failed', 'aborted')
MOVE_FINAL_STATES = ('done', 'failed', 'aborted')
# The bounds the agent puts on a move's tuning, from its table of
# volume-move's arguments: 1 TB/s is a typo, not a rate limit; an AIO
# write delayed longer than a second is a stalled guest.
MOVE_MAX_ROUNDS = control_check.bounds('volume-move', 'max_rounds')[1]
MOVE_CONVERGE_MAX = control_check.bounds('volume-move', 'converge_bytes')[1]
MOVE_DOWNTIME_MAX_MS = control_check.bounds('volume-move', 'downtime_ms')[1]
MOVE_AIO_THRESHOLD_MAX = control_check.bounds('volume-move',
                                              'aio_threshold')[1]
MOVE_AIO_DELAY_MAX_US = control_check.bounds('volume-move',
                                             'aio_delay_us')[1]
MOVE_RATE_LIMIT_MAX_MBPS = control_check.bounds('volume-move',
                                                'rate_limit_mbps')[1]
# The agent counts reuses up to RWS_7.
RWS_N_MIN, RWS_N_MAX = control_check.bounds('volume-attach', 'rws_n')

_RECV_CHUNK = 256 * units.Ki


class AgentClient(object):
    """Talks to one fcache agent.

    Every public method sends one request and returns the agent's
    ``result`` object (a dict).

    :raises nova_ext.exception.InvalidArgument: an argument is refused
        before anything is sent.
    :raises nova_ext.exception.AgentUnreachable: the socket cannot be
        connected to, or the connection broke.
    :raises nova_ext.exception.AgentTimeout: no complete answer within
        ``timeout`` seconds.
    :raises nova_ext.exception.AgentError: the agent answered with an error.
    :raises nova_ext.exception.ProtocolError: the answer is not a valid
        response (garbled, truncated, or larger than 16 MiB).
    """

    def __init__(self, socket_path=DEFAULT_SOCKET, timeout=DEFAULT_TIMEOUT):
        self.socket_path = socket_path
        self.timeout = timeout

    def __repr__(self):
        return '%s(%r, timeout=%r)' % (type(self).__name__,
                                       self.socket_path, self.timeout)

    # -- operations ---------------------------------------------------------

    def capabilities(self):
        """Return what the agent runs and the bounds it enforces.

        ``{"engine", "strategies": [{"name", "summary", "supported",
        "why_not"}], "write_policies", "admissions", "staging_kinds",
        "move_schemes", "bounds": {"rws_n_max", "rws_window_max_s"}}``:
        the lists :mod:`nova_ext.vocabulary` states, and which strategies
        and move schemes this agent's engine can run.
        """
        return self.call('capabilities')

    def status(self):
        """Return what the agent is and holds.

        ``{"version", "engine", "capacity_bytes", "used_bytes", "volumes",
        "allocation"}``; ``allocation`` is what :meth:`allocation` returns.
        """
        return self.call('agent-status')

    def allocation(self):
        """Return the on-demand cache allocation of the agent.

        ``{"mode": "fixed"|"rwss", "spare": "proportional"|"idle",
        "window_s", "window_auto", "window_min_s", "window_max_s",
        "headroom", "capacity_bytes", "volumes": [...]}``; each
        volume is ``{"id", "share_bytes", "used_bytes", "limit_bytes",
        "rwss_observed_bytes", "rwss_predicted_bytes", "prediction_error",
        "window_s", "window_auto", "window_at_knee", "rws_n",
        "staging": {...}}`` (the ``rwss_*`` figures and
        ``prediction_error`` are None until the first window closes;
        ``window_s`` is the window in force, chosen at the knee when
        ``window_auto``).
        """
        return self.call('allocation')

    def attach_volume(self, volume_id, origin, cache_size=None,
                      write_policy=None, admission=None, rws_n=None,
                      staging=None, rws_window_s=None):
        """Put a cache in front of ``origin`` and export it over NBD.

        :param volume_id: the Cinder volume id (any non-empty string).
        :param origin: block device or file path, an ``nbd://`` /
            ``nbd+unix://`` URI, or a Ceph RBD image in QEMU's ``rbd:``
            syntax (:mod:`nova_ext.virt.rbd`).
        :param cache_size: bytes of cache for this volume (int), or None
            for the agent's default.
        :param write_policy: one of :data:`WRITE_POLICIES` or None.
        :param admission: one of :data:`ADMISSION_POLICIES` or None.
        :param rws_n: with admission ``rws``, the reuses (within the
            window) after which a block is admitted: an int from
            :data:`RWS_N_MIN` to :data:`RWS_N_MAX`, or None.
        :param rws_window_s: the volume's own demand window in seconds
            (1 to :data:`RWS_WINDOW_MAX_S`), or None for the agent's
            ``allocation_window``.
        :param staging: with admission ``rws``, what the staging area keeps
            of a block not yet admitted: one of :data:`STAGING_KINDS` or
            None.
        :returns: ``{"volume_id", "export_uri"}``; ``export_uri`` is an NBD
            URI such as ``nbd+unix:///NAME?socket=/run/fcache/exports/ID.sock``
            whose NAME, a random secret, is the only name the export
            answers to: pass the URI on whole (doc/admin/security.rst).
        """
        args = {'volume_id': _volume_id(volume_id),
                'origin': _non_empty('origin', origin)}
        if cache_size is not None:
            args['cache_size'] = _positive_size('cache_size', cache_size)
        if write_policy is not None:
            args['write_policy'] = _choice('write_policy', write_policy,
                                           WRITE_POLICIES)
        if admission is not None:
            args['admission'] = _choice('admission', admission,
                                        ADMISSION_POLICIES)
        if rws_n is not None:
            args['rws_n'] = check_rws_n(rws_n)
        if staging is not None:
            args['staging'] = _choice('staging', staging, STAGING_KINDS)
        if rws_window_s is not None:
            args['rws_window_s'] = check_rws_window(rws_window_s)
        return self.call('volume-attach', **args)

    def show_volume(self, volume_id):
        """Return the volume's settings and statistics.

        At least ``reads, writes, read_hits, read_misses, hit_ratio,
        cached_blocks, dirty_blocks, origin_read_bytes, origin_write_bytes,
        cache_write_bytes, block_size``, and ``allocation`` (the volume's
        entry of :meth:`allocation` without its ``id``).
        """
        return self.call('volume-show', volume_id=_volume_id(volume_id))

    def set_strategy_hint(self, volume_id, strategy, ttl_s=600):
        """Steer the volume's next live migration to ``strategy``.

        For ``ttl_s`` seconds (1 to 86400) the source's Nova driver uses
        ``strategy`` (one of :data:`HINT_STRATEGIES`) for this volume
        instead of what its volume type says; ``''`` clears it.
        ``volume-show`` reports it as ``strategy_hint``.
        """
        if strategy not in HINT_STRATEGIES + ('',):
            raise exception.InvalidArgument(
                name='strategy', value=strategy,
                reason='must be one of %s, or empty to clear the hint'
                % ', '.join(HINT_STRATEGIES))
        if (isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or
                not 1 <= ttl_s <= 86400):
            raise exception.InvalidArgument(
                name='ttl_s', value=ttl_s,
                reason='must be a number of seconds from 1 to 86400')
        return self.call('volume-hint', volume_id=_volume_id(volume_id),
                         strategy=strategy, ttl_s=ttl_s)

    def move_volume(self, volume_id, to, scheme=None, max_rounds=None,
                    converge_bytes=None, aio_threshold=None,
                    aio_delay_us=None, rate_limit_mbps=None,
                    downtime_ms=None):
        """Start moving the volume's origin to ``to`` while it is in use.

        The agent copies origin A (the volume's current origin) to origin
        B (``to``) with ``scheme`` and then serves the same export from B;
        :meth:`move_status` follows the copy.

        :param to: the new origin, as ``origin`` of
            :meth:`attach_volume`.
        :param scheme: one of :data:`MOVE_SCHEMES`, or None for the
            agent's default.
        :param max_rounds: ``dbt``: copy rounds before it pauses the VM
            anyway; ``dbt_capped``: before it gives up (int 1..1000), or
            None.
        :param converge_bytes: ``dbt_capped``: dirty bytes small enough
            to copy with the volume paused (int 1..2^40), or None.
        :param downtime_ms: ``dbt_capped``: the longest pause of its last
            round, which the agent cuts short there and tries again later
            (int 1..60000), or None for the agent's 200.
        :param aio_threshold: ``aio``: pending duplicate writes before a
            write is delayed (int 1..1000000), or None.
        :param aio_delay_us: ``aio``: the delay, microseconds (int
            1..1000000), or None.
        :param rate_limit_mbps: cap of the copy in MB/s (10^6 bytes per
            second; int 1..1000000), or None.
        :returns: ``{"volume_id", "scheme", "state"}``.
        """
        args = {'volume_id': _volume_id(volume_id),
                'to': _non_empty('to', to)}
        if scheme is not None:
            args['scheme'] = _choice('scheme', scheme, MOVE_SCHEMES)
        for name, value, lo, hi in (
                ('max_rounds', max_rounds, 1, MOVE_MAX_ROUNDS),
                ('converge_bytes', converge_bytes, 1, MOVE_CONVERGE_MAX),
                ('downtime_ms', downtime_ms, 1, MOVE_DOWNTIME_MAX_MS),
                ('aio_threshold', aio_threshold, 1, MOVE_AIO_THRESHOLD_MAX),
                ('aio_delay_us', aio_delay_us, 1, MOVE_AIO_DELAY_MAX_US),
                ('rate_limit_mbps', rate_limit_mbps, 1,
                 MOVE_RATE_LIMIT_MAX_MBPS)):
            if value is not None:
                args[name] = _int_in(name, value, lo, hi)
        return self.call('volume-move', **args)

    def move_status(self, volume_id):
        """Return the progress of the volume's storage move.

        ``{"volume_id", "scheme", "state", "from", "to", "bytes_total",
        "bytes_copied", "rounds", "held_rounds_cut", "dirty_bytes",
        "pause_estimate_ms", "eta_s", "aio_delay_ms", "downtime_ms",
        "elapsed_s", "error", "io": {"a_read_bytes", "a_write_bytes",
        "b_read_bytes", "b_write_bytes", "vm_write_bytes",
        "redundant_write_bytes"}}``; ``state`` is one of
        :data:`MOVE_STATES` (``a`` is the old origin, ``b`` the new).
        """
        return self.call('volume-move-status',
                         volume_id=_volume_id(volume_id))

    def abort_move(self, volume_id):
        """Stop the volume's storage move; the old origin keeps serving."""
        return self.call('volume-move-abort',
                         volume_id=_volume_id(volume_id))

    def detach_volume(self, volume_id, discard_dirty=False):
        """Flush and remove the volume's cache and NBD export.

        :param discard_dirty: drop the volume's dirty (write_back) blocks
            instead of writing them back: for a volume whose VM was
            evacuated to another host, whose blocks here are stale.  The
            agent refuses while a client has the export open.  The result
            then has ``dirty_blocks_dropped``.
        """
        if discard_dirty:
            return self.call('volume-detach', volume_id=_volume_id(volume_id),
                             discard_dirty=True)
        return self.call('volume-detach', volume_id=_volume_id(volume_id))

    def claim_volume(self, volume_id):
        """Let the write-back an agent restart held go on.

        After a restart the agent writes none of a write_back volume's
        recovered dirty blocks back until the volume is claimed (its VM
        reconnecting claims it): they may be stale if the VM was
        evacuated.  Returns ``{"volume_id", "writeback_was_held"}``.
        """
        return self.call('volume-claim', volume_id=_volume_id(volume_id))

    def list_volumes(self):
        """Return ``{"volumes": [...]}``, one entry per attached volume."""
        return self.call('volume-list')

    def extend_volume(self, volume_id):
        """Serve the volume's new size once its origin has grown.

        :returns: ``{"volume_id": ..., "size": BYTES}``, the size served
            now (the old one if the origin did not grow).
        """
        return self.call('volume-extend', volume_id=_volume_id(volume_id))

    def metrics(self):
        """Return the agent's metrics in the Prometheus text format.

        The same text the agent writes to its ``metrics_path`` file for
        node-exporter's textfile collector (doc/admin/monitoring.rst),
        sampled now.
        """
        return self.call('metrics')['text']

    def reset_stats(self, volume_id=None):
        """Zero a volume's counters and restart its hit-ratio windows.

        ``volume_id=None``: every volume's, and the host's totals.

        :returns: ``{"volume_id": ..., "reset_time": UNIX_SECONDS}``, or
            ``{"reset": "all", "reset_time": ...}``.
        """
        if volume_id is None:
            return self.call('volume-stats-reset', all=True)
        return self.call('volume-stats-reset',
                         volume_id=_volume_id(volume_id))

    def set_volume(self, volume_id, write_policy=None, cache_size=None):
        """Change an attached volume's settings while its VM runs.

        :param write_policy: one of :data:`WRITE_POLICIES`.  Leaving
            ``write_back``, the agent writes every dirty block back to the
            origin before it answers (the VM's writes are held only for
            the last pass); if the origin fails, the volume keeps its old
            policy and the error says so.  Refused while the volume
            migrates or moves, and by the dmcache engine.
        :param cache_size: bytes, a multiple of the agent's block size.
            Shrinking, the agent gives the cache's least recently used
            blocks back to the host, writing dirty ones back to the origin
            first; growing takes the host's free cache.  Refused, the size
            unchanged and nothing lost, by the dmcache engine, while the
            volume migrates or moves, beyond the host's free cache, and
            if the origin fails a write-back.
        :returns: ``{"volume_id", "write_policy", "previous_write_policy",
            "dirty_blocks_written", "cache_size", "previous_cache_size",
            "blocks_evicted"}``.
        """
        args = {'volume_id': _volume_id(volume_id)}
        if write_policy is None and cache_size is None:
            raise exception.InvalidArgument(
                name='write_policy', value=None,
                reason='give a write policy or a cache size to set')
        if write_policy is not None:
            args['write_policy'] = _choice('write_policy', write_policy,
                                           WRITE_POLICIES)
        if cache_size is not None:
            args['cache_size'] = _positive_size('cache_size', cache_size)
        return self.call('volume-set', **args)

    # -- transport ----------------------------------------------------------

    def call(self, op, **args):
        """Send request ``op`` with ``args`` and return its result object.

        ``args`` are checked against the agent's table of operations
        first (nova_ext.control_check): a request the agent would refuse
        for its form is refused here, naming the argument.
        """
        self._check_request(op, args)
        request = json.dumps({'op': op, 'args': args},
                             separators=(',', ':')).encode('ascii') + b'\n'
        if len(request) > MAX_REQUEST_BYTES:
            raise exception.InvalidArgument(
                name='request', value=op,
                reason='%d bytes exceeds the agent limit of %d bytes' % (
                    len(request), MAX_REQUEST_BYTES))

        LOG.debug("Sending %(op)s to the fcache agent at %(path)s",
                  {'op': op, 'path': self.socket_path})
        backoff = _Backoff(self.timeout)
        while True:
            try:
                result = self._decode(self._exchange(op, request))
                break
            except exception.AgentError as exc:
                # The agent serves as many connections as it may and
                # refused this one before reading the request: nothing
                # ran, so the same request goes again once it has caught
                # up.
                if not (exc.busy and backoff.wait()):
                    raise
        LOG.debug("fcache agent at %(path)s completed %(op)s",
                  {'op': op, 'path': self.socket_path})
        return result

    def _check_request(self, op, args):
        control_check.check_request(op, args)

    def _exchange(self, op, request):
        """Send ``request``; return the response line without its newline."""
        sock = self._connect()
        try:
            try:
                try:
                    sock.sendall(request)
                except (BrokenPipeError, ConnectionResetError) as exc:
                    # An agent at its connection limit answers "busy" and
                    # closes without reading the request: read that answer.
                    line = self._read_line_if_any(sock)
                    if line is None:
                        raise exc
                    return line
                return self._read_line(sock)
            except socket.timeout:
                raise exception.AgentTimeout(path=self.socket_path, op=op,
                                             timeout=self.timeout)
            except OSError as exc:
                raise exception.AgentUnreachable(
                    path=self.socket_path,
                    reason='connection lost: %s' % _os_reason(exc))
        finally:
            sock.close()

    def _connect(self):
        """Connect within ``timeout``, waiting out a full accept queue.

        A unix socket whose listen backlog is full refuses at once with
        EAGAIN: that is a busy agent, not an absent one.
        """
        backoff = _Backoff(self.timeout)
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.socket_path)
                return sock
            except socket.timeout:
                sock.close()
                raise exception.AgentUnreachable(
                    path=self.socket_path,
                    reason='connect timed out after %s s' % self.timeout)
            except OSError as exc:
                sock.close()
                if exc.errno == errno.EAGAIN and backoff.wait():
                    continue
                raise exception.AgentUnreachable(
                    path=self.socket_path, reason=_os_reason(exc))

    def _read_line_if_any(self, sock):
        """The answer already sent on ``sock``, or None if there is none."""
        try:
            return self._read_line(sock)
        except (OSError, exception.ProtocolError):
            return None

    def _read_line(self, sock):
        buf = bytearray()
        while True:
            chunk = sock.recv(_RECV_CHUNK)
            if not chunk:
                if buf:
                    reason = ('connection closed after %d bytes, before the '
                              'end of the response' % len(buf))
                else:
                    reason = 'connection closed without a response'
                raise exception.ProtocolError(path=self.socket_path,
                                              reason=reason)
            newline = chunk.find(b'\n')
            if newline >= 0:
                buf += chunk[:newline]
            else:
                buf += chunk
            if len(buf) > MAX_RESPONSE_BYTES:
                raise exception.ProtocolError(
                    path=self.socket_path,
                    reason='response larger than %d bytes' %
                    MAX_RESPONSE_BYTES)
            if newline >= 0:
                return bytes(buf)

    def _decode(self, line):
        def bad(reason):
            return exception.ProtocolError(path=self.socket_path,
                                           reason=reason)

        try:
            response = json.loads(line.decode('utf-8'))
        except (UnicodeDecodeError, ValueError) as exc:
            raise bad('response is not valid JSON (%s)' % exc)
        if not isinstance(response, dict):
            raise bad('response is not a JSON object')
        ok = response.get('ok')
        if ok is True:
            result = response.get('result')
            if result is None:
                return {}
            if not isinstance(result, dict):
                raise bad('"result" is not a JSON object')
            return result
        if ok is False:
            error = response.get('error')
            if not isinstance(error, str) or not error.strip():
                error = 'the agent reported an error without a message'
            err = response.get('errno')
            if isinstance(err, bool) or not isinstance(err, int):
                err = None
            else:
                err = abs(err)
            raise exception.AgentError(error, err,
                                       busy=response.get('busy') is True)
        raise bad('response has no boolean "ok" member')


class _Backoff(object):
    """Pauses of 5 ms doubling up to 0.2 s, within ``timeout`` seconds."""

    def __init__(self, timeout):
        self.deadline = time.monotonic() + timeout
        self.delay = 0.005

    def wait(self):
        """Sleep the next pause and return True, or False if past time."""
        if time.monotonic() + self.delay >= self.deadline:
            return False
        time.sleep(self.delay)
        self.delay = min(self.delay * 2, 0.2)
        return True


def _non_empty(name, value):
    if not isinstance(value, str) or not value:
        raise exception.InvalidArgument(name=name, value=value,
                                        reason='must be a non-empty string')
    return value


def _volume_id(volume_id):
    return _non_empty('volume_id', volume_id)


def check_rws_window(value, name='rws_window_s'):
    """Return ``value`` if it is a demand window the agent accepts."""
    if (isinstance(value, bool) or not isinstance(value, int) or
            not 1 <= value <= RWS_WINDOW_MAX_S):
        raise exception.InvalidArgument(
            name=name, value=value,
            reason='must be a number of seconds from 1 to %d (30 days)' %
            RWS_WINDOW_MAX_S)
    return value


def check_rws_n(value, name='rws_n'):
    """Return ``value`` if it is an RWS_N the agent tracks, else raise."""
    if (isinstance(value, bool) or not isinstance(value, int) or
            not RWS_N_MIN <= value <= RWS_N_MAX):
        raise exception.InvalidArgument(
            name=name, value=value,
            reason='must be an integer from %d to %d' % (RWS_N_MIN,
                                                         RWS_N_MAX))
    return value


def _positive_size(name, value):
    if (isinstance(value, bool) or not isinstance(value, int) or
            not 0 < value <= units.U64_MAX):
        raise exception.InvalidArgument(
            name=name, value=value,
            reason='must be a positive number of bytes')
    return value


def _int_in(name, value, lo, hi):
    if (isinstance(value, bool) or not isinstance(value, int) or
            not lo <= value <= hi):
        raise exception.InvalidArgument(
            name=name, value=value,
            reason='must be an integer from %d to %d' % (lo, hi))
    return value


def _choice(name, value, choices):
    if value not in choices:
        raise exception.InvalidArgument(
            name=name, value=value,
            reason='must be one of %s' % ', '.join(choices))
    return value


def _os_reason(exc):
    if exc.errno == errno.ENOENT:
        return 'no such socket'
    if exc.errno in (errno.EACCES, errno.EPERM):
        return 'permission denied'
    if exc.errno == errno.ECONNREFUSED:
        return 'connection refused (agent not running, or a stale socket)'
    return exc.strerror or str(exc)
