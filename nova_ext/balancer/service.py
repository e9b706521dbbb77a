# SPDX-License-Identifier: Apache-2.0
"""``fcache-balancer``: live-migrate VMs to balance the hosts' caches.

Each observation (by default once per agent allocation window) reads the
hosts' cache capacity and predicted demand from a source plugin
(:mod:`nova_ext.balancer.sources`), maps them to Nova's servers through
the Nova API, and hands the picture to
:class:`nova_ext.balancer.decision.Balancer`.  A decision is logged and
notified (``fcache.balancer.decision``), then, unless ``dry_run``, carried
out with ``os-migrateLive`` to the chosen host: Nova's live migration
runs as for any operator's request, and the volume type's
``fcache:strategy`` moves the cache.  The move is notified when Nova
accepts it (``fcache.balancer.move.start``) and when a later observation
sees the VM on its destination (``fcache.balancer.move.end``).

Nothing stops the balancer but a signal: an agent that does not answer
leaves its host out of that observation; a Nova API error, a migration
Nova refuses or one that fails is logged, notified
(``fcache.balancer.error``) and the balancer goes on (the VM stays in its
cool-down, so a VM that cannot move is not retried at once).
"""

import logging
import os
import signal
import sys
import threading
import time

from oslo_config import cfg
from oslo_log import log as oslo_log

from nova_ext.balancer import credentials
from nova_ext.balancer import decision as decision_mod
from nova_ext.balancer import inventory
from nova_ext.balancer import nova as nova_mod
from nova_ext.balancer import opts
from nova_ext.balancer import sources
from nova_ext import exception
from nova_ext import notifications
from nova_ext import version
from nova_ext import warnings_filter

LOG = logging.getLogger(__name__)

DECISION = 'fcache.balancer.decision'
ERROR = 'fcache.balancer.error'
MOVE_START = 'fcache.balancer.move.start'
MOVE_END = 'fcache.balancer.move.end'
PUBLISHER_ID = 'fcache.balancer'
DEFAULT_INTERVAL_S = 60.0


class BalancerNotifier(object):
    """Emits the balancer's events; a failure to notify is only logged."""

    def __init__(self, notifier):
        self._notifier = notifier

    def decision(self, data):
        self._emit('info', DECISION, data)

    def error(self, data):
        self._emit('error', ERROR, data)

    def move_start(self, data):
        self._emit('info', MOVE_START, data)

    def move_end(self, data):
        self._emit('info', MOVE_END, data)

    def _emit(self, priority, event_type, data):
        if self._notifier is None:
            return
        try:
            getattr(self._notifier, priority)({}, event_type,
                                              notifications.payload(data))
        except Exception:
            LOG.exception('could not send the %s notification', event_type)


class Observation(object):
    """What one observation saw and did (returned for tests and logs)."""

    def __init__(self, window):
        self.window = window
        self.decisions = []
        self.started = []        # server ids whose migration Nova accepted
        self.errors = []         # operator-readable messages
        self.completed = []      # (server id, host) seen arrived
        self.failed = []         # (server id, message)
        self.hosts = []
        self.unreachable = {}


class BalancerLoop(object):
    """The observation logic, free of any service machinery."""

    def __init__(self, conf, source, nova, notifier, balancer=None):
        group = conf.fcache_balancer
        self.conf = conf
        self.source = source
        self.nova = nova
        self.notifier = notifier
        self.dry_run = group.dry_run
        self.max_moves = group.max_moves_per_window or None
        self.balancer = balancer or decision_mod.Balancer(
            threshold=group.threshold, windows=group.windows,
            cooldown_windows=group.cooldown_windows)
        self.window = 0
        self.window_s = None
        self.pending = {}        # server id -> Decision in flight
        self.started_at = {}     # server id -> time.monotonic() it started

    def _error(self, obs, message, **data):
        LOG.error('%s', message)
        obs.errors.append(message)
        data.update({'window': obs.window, 'error': message})
        self.notifier.error(data)

    def _follow(self, obs, servers):
        """Check the migrations started in earlier observations."""
        by_id = {s.id: s for s in servers}
        for sid, dec in sorted(self.pending.items()):
            server = by_id.get(sid)
            if server is None:
                del self.pending[sid]       # deleted meanwhile
                self.started_at.pop(sid, None)
                continue
            if server.migrating:
                continue
            del self.pending[sid]
            began = self.started_at.pop(sid, None)
            if server.host == dec.destination:
                LOG.info('server %s is now on %s', sid, dec.destination)
                obs.completed.append((sid, dec.destination))
                # Seen by an observation: the duration is an upper bound,
                # within one observation interval.
                self.notifier.move_end({
                    'vm': sid, 'source': dec.source,
                    'destination': dec.destination, 'window': obs.window,
                    'decided_window': dec.window,
                    'duration_s': (None if began is None else
                                   round(time.monotonic() - began, 3))})
                continue
            status = None
            try:
                status = self.nova.last_migration(sid)
            except nova_mod.NovaError as exc:
                LOG.warning('%s', exc)
            message = (
                'the live migration of server %s from %s to %s failed: it '
                'is still on %s (Nova migration %s); see "openstack server '
                'migration list --server %s" and the nova-compute logs of '
                'both hosts' % (
                    sid, dec.source, dec.destination, server.host,
                    '%(id)s %(status)s' % status if status else 'unknown',
                    sid))
            obs.failed.append((sid, message))
            self._error(obs, message, vm=sid, source=dec.source,
                        destination=dec.destination, phase='migration')

    def observe(self):
        """One observation: read, decide, act.  Returns an Observation."""
        window = self.window
        self.window += 1
        obs = Observation(window)
        loads, obs.unreachable = self.source.loads()
        for host, why in sorted(obs.unreachable.items()):
            self._error(obs, why, host=host, phase='source')
        windows = [lo.window_s for lo in loads.values() if lo.window_s]
        self.window_s = min(windows) if windows else self.window_s
        try:
            servers = self.nova.servers()
            enabled = self.nova.compute_hosts()
        except nova_mod.NovaError as exc:
            self._error(obs, '%s; observation %d skipped (the run of '
                        'over-threshold windows restarts)' % (exc, window),
                        phase='nova')
            return obs
        self._follow(obs, servers)
        hosts, vms = inventory.build(loads, servers, enabled=enabled)
        obs.hosts = hosts
        for vm in vms:
            if vm.id in self.pending:
                vm.migrating = True
        obs.decisions = self.balancer.observe_many(
            window, hosts, vms, max_moves=self.max_moves)
        for host, why in self.balancer.skipped:
            LOG.info('%s is over the threshold but nothing moves: %s',
                     host, why)
        for dec in obs.decisions:
            data = dec.as_dict()
            data['dry_run'] = self.dry_run
            LOG.info('%s%s', 'dry run, not migrating: ' if self.dry_run
                     else '', dec.reason)
            self.notifier.decision(data)
            if self.dry_run:
                continue
            try:
                self.nova.live_migrate(dec.vm.id, dec.destination)
            except nova_mod.NovaError as exc:
                self._error(obs, '%s; the balancer goes on without this '
                            'move' % exc, vm=dec.vm.id, source=dec.source,
                            destination=dec.destination, phase='api')
                continue
            obs.started.append(dec.vm.id)
            self.pending[dec.vm.id] = dec
            self.started_at[dec.vm.id] = time.monotonic()
            self.notifier.move_start({
                'vm': dec.vm.id, 'source': dec.source,
                'destination': dec.destination, 'window': obs.window,
                'demand_bytes': dec.vm.demand_bytes})
        return obs

    def interval(self):
        configured = self.conf.fcache_balancer.interval
        if configured:
            return configured
        return self.window_s or DEFAULT_INTERVAL_S


class BalancerService(object):
    """Runs :class:`BalancerLoop` in a thread until stopped."""

    def __init__(self, loop):
        self.loop = loop
        self._stop = threading.Event()
        self._thread = None

    def _run(self):
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.loop.observe()
            except Exception:
                # A bug or an unforeseen failure: log it, keep balancing.
                LOG.exception('observation %d failed', self.loop.window - 1)
            self._stop.wait(max(0.0, self.loop.interval() -
                                (time.monotonic() - began)))

    def start(self):
        self._stop.clear()
        self._thread = threading.Thread(target=self._run,
                                        name='fcache-balancer', daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()

    def wait(self):
        if self._thread is not None:
            self._thread.join()


SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def serve(conf, service):
    """Run ``service`` until SIGTERM or SIGINT; SIGHUP reloads the options.

    The balancer is one thread, so it needs no service framework: the
    main thread blocks the three signals (the service's thread inherits
    the mask) and takes them with sigwait, so a SIGTERM stops the service
    at once if it is waiting for its next observation, else after the
    observation under way.  (oslo.service's eventlet launcher, used
    before, did not see a SIGTERM until the waiting thread woke, up to an
    interval later, and imports eventlet.)
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        service.start()
        while True:
            signum = signal.sigwait(SIGNALS)
            if signum != signal.SIGHUP:
                break
            LOG.info('SIGHUP: reloading the mutable options')
            conf.mutate_config_files()
        LOG.info('%s: stopping after the observation under way',
                 signal.Signals(signum).name)
        service.stop()
        service.wait()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def make_notifier(conf):
    """An oslo.messaging notifier from ``[oslo_messaging_notifications]``."""
    import oslo_messaging
    transport = oslo_messaging.get_notification_transport(conf)
    return BalancerNotifier(oslo_messaging.Notifier(
        transport, publisher_id=PUBLISHER_ID))


def main(argv=None):
    """The ``fcache-balancer`` console script."""
    # Before make_notifier imports oslo.messaging, which imports eventlet.
    warnings_filter.ignore_eventlet_deprecation()
    conf = cfg.ConfigOpts()
    oslo_log.register_options(conf)
    opts.register_opts(conf)
    conf.register_cli_opt(cfg.StrOpt(
        'os-cloud', default=os.environ.get(credentials.CLOUD_ENV),
        metavar='NAME',
        help='Take the Nova credentials from cloud NAME of clouds.yaml '
             '(default: $OS_CLOUD; else the OS_* variables when '
             '$OS_AUTH_URL is set; else [nova] of the configuration '
             'file).'))
    default = [f for f in (opts.DEFAULT_CONFIG_FILE,) if os.path.exists(f)]
    conf(sys.argv[1:] if argv is None else argv, project='fcache',
         prog='fcache-balancer', default_config_files=default,
         version=version.version_string())
    oslo_log.setup(conf, 'fcache-balancer')
    try:
        source = sources.load_source(conf)
        nova = nova_mod.NovaView.from_conf(
            conf, credentials.chosen(conf.os_cloud))
    except exception.FcacheException as exc:
        LOG.error('fcache-balancer cannot start: %s', exc)
        return 1
    loop = BalancerLoop(conf, source, nova, make_notifier(conf))
    serve(conf, BalancerService(loop))
    return 0
