# SPDX-License-Identifier: Apache-2.0
"""Carrying out an evacuation plan through Nova.

Steps start in the plan's order as slots free up: at most
``max_concurrent`` live migrations out of the source and
``per_destination`` into one destination at a time (a step whose
destination is busy lets the next one go first).  Each migration is
followed through the Nova API until the server is active on another host
(done), back on the source with no task (failed), or past the timeout
(failed, not aborted).  A step Nova refuses is failed at once; the others
go on.
"""

import logging
import time

from nova_ext.balancer import nova as nova_mod
from nova_ext import exception  # noqa: H306

LOG = logging.getLogger(__name__)


class StepResult(object):
    """The outcome of one step."""

    __slots__ = ('step', 'state', 'host', 'message', 'started_s',
                 'ended_s')

    def __init__(self, step):
        self.step = step
        self.state = 'pending'      # running, done, failed
        self.host = step.vm.host
        self.message = ''
        self.started_s = self.ended_s = None

    def as_dict(self):
        d = self.step.as_dict()
        d.update({'state': self.state, 'host': self.host,
                  'message': self.message,
                  'duration_s': (None if self.started_s is None or
                                 self.ended_s is None
                                 else round(self.ended_s - self.started_s,
                                            3))})
        return d


class Evacuator(object):
    """Runs a :class:`~nova_ext.balancer.evacuation_plan.Plan`.

    :param on_event: called with ``(event, StepResult, results)`` on
        ``start``, ``done`` and ``failed`` (the progress display).
    """

    def __init__(self, nova, plan, poll_interval=2.0, timeout=3600.0,
                 on_event=None, clock=time.monotonic, sleep=time.sleep,
                 source_agent=None):
        self.nova = nova
        self.plan = plan
        # The source host's agent: each volume's planned strategy goes to
        # it just before the VM's migration (volume-hint), since Nova's
        # API carries none.  None: the volume types decide.
        self.source_agent = source_agent
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.on_event = on_event or (lambda *a: None)
        self.clock = clock
        self.sleep = sleep
        self.results = [StepResult(s) for s in plan.steps]

    def _event(self, name, result):
        self.on_event(name, result, self.results)

    def _finish(self, result, state, message=''):
        result.state = state
        result.message = message
        result.ended_s = self.clock()
        (LOG.info if state == 'done' else LOG.error)(
            'server %s: %s%s', result.step.vm.id, state,
            ': ' + message if message else '')
        self._event(state, result)

    def _start_ready(self, running):
        busy = {}
        for r in running:
            busy[r.step.destination] = busy.get(r.step.destination, 0) + 1
        for r in self.results:
            if len(running) >= self.plan.max_concurrent:
                return
            if r.state != 'pending':
                continue
            dest = r.step.destination
            if busy.get(dest, 0) >= self.plan.per_destination:
                continue
            r.started_s = self.clock()
            self._hint(r)
            try:
                self.nova.live_migrate(r.step.vm.id, dest)
            except nova_mod.NovaError as exc:
                self._finish(r, 'failed', str(exc))
                continue
            r.state = 'running'
            running.append(r)
            busy[dest] = busy.get(dest, 0) + 1
            self._event('start', r)

    def _hint(self, result):
        if self.source_agent is None:
            return
        # Long enough for the migration to start, short enough not to
        # steer a later one if this one never does.
        ttl = int(min(max(self.timeout, 60), 86400))
        for vol_id, strategy in sorted(result.step.strategies.items()):
            try:
                self.source_agent.set_strategy_hint(vol_id, strategy,
                                                    ttl_s=ttl)
            except exception.FcacheException as exc:
                # The migration still goes, with the type's strategy.
                LOG.warning('server %s: cannot hand strategy %s for volume '
                            '%s to the source agent: %s; its volume type '
                            'decides', result.step.vm.id, strategy, vol_id,
                            exc)
                result.message = 'hint not set for volume %s' % vol_id

    def _check(self, running):
        for r in list(running):
            sid = r.step.vm.id
            try:
                server = self.nova.server(sid)
            except nova_mod.NovaError as exc:
                LOG.warning('%s (retrying)', exc)
                continue
            r.host = server.host
            if not server.migrating and server.host != self.plan.source:
                running.remove(r)
                if server.status == 'ERROR':
                    self._finish(r, 'failed', 'server is in ERROR on %s'
                                 % server.host)
                else:
                    self._finish(r, 'done')
            elif not server.migrating:
                # Back (or still) on the source with nothing going on.
                running.remove(r)
                self._finish(r, 'failed', self._why(sid))
            elif self.clock() - r.started_s > self.timeout:
                running.remove(r)
                self._finish(r, 'failed', 'still migrating after %.0f s; '
                             'not aborted: follow it with "openstack server '
                             'migration list --server %s"'
                             % (self.timeout, sid))

    def _why(self, sid):
        try:
            last = self.nova.last_migration(sid)
        except nova_mod.NovaError as exc:
            last, extra = None, ' (%s)' % exc
        else:
            extra = ''
        what = ('Nova migration %(id)s is %(status)s' % last if last
                else 'no migration record')
        return ('the live migration did not happen, the server is still on '
                '%s: %s%s; see the nova-compute logs of both hosts'
                % (self.plan.source, what, extra))

    def run(self):
        """Run every step; return the list of :class:`StepResult`."""
        running = []
        while True:
            self._start_ready(running)
            if not running:
                if all(r.state != 'pending' for r in self.results):
                    return self.results
                continue    # a refused step freed its slot at once
            self.sleep(self.poll_interval)
            self._check(running)
