# SPDX-License-Identifier: Apache-2.0
"""``fcache evacuate HOST``: empty a host with its caches kept warm.

Like ``nova host-evacuate-live HOST``, but planned for the caches
(:mod:`nova_ext.balancer.evacuation_plan`): each VM goes, in turn and with
bounded concurrency, to the host that keeps the cache load most even, and
each volume's cache moves by the strategy the cost model picks for it (a
hot cache over the migration link, a cold one not at all), so that the
shared storage is not flooded by caches refilling at once.

It reads the hosts' caches from the balancer's configuration file
(``--config-file``, default /etc/fcache/fcache-balancer.conf:
``[fcache_balancer] source`` and ``agent_sockets``) and Nova's credentials
the OpenStack client's way (``--os-cloud`` / ``$OS_CLOUD`` in clouds.yaml,
or the ``OS_*`` variables), else from that file's ``[nova]``
(:mod:`nova_ext.balancer.credentials`).  ``--socket`` is not used.
With ``[oslo_messaging_notifications] driver`` set in that file, the
evacuation is notified: ``fcache.evacuation.start`` (the plan), one
``fcache.evacuation.step`` per VM as it ends, ``fcache.evacuation.end``.
"""

import os
import sys
import time

from oslo_config import cfg

from nova_ext.balancer import credentials as credentials_mod
from nova_ext.balancer import evacuation_plan
from nova_ext.balancer import evacuation_run
from nova_ext.balancer import inventory
from nova_ext.balancer import nova as nova_mod
from nova_ext.balancer import opts
from nova_ext.balancer import sources
from nova_ext.commands import output
from nova_ext.commands import progress
from nova_ext import exception
from nova_ext import notifications
from nova_ext import warnings_filter

# The steps' columns without --long: a row in 120 characters (a VM id is
# 36).  With --long the volumes, the host it is on and the message follow.
COLUMNS = ('vm', 'vm_name', 'destination', 'strategies', 'wave', 'state',
           'duration_s')
LONG_COLUMNS = ('volumes', 'host', 'message')


class EvacuationFailed(exception.FcacheException):
    msg_fmt = '%(failed)d of %(total)d VMs could not leave %(host)s'


def register(subparsers, parents):
    parser = subparsers.add_parser(
        'evacuate', parents=parents,
        help='live-migrate every VM off a host through Nova, caches warm',
        description='Live-migrate every VM off HOST through the Nova API, '
                    'in an order, to destinations and with per-volume '
                    'cache strategies chosen to spare the shared storage; '
                    'at most --max-concurrent migrations out of HOST and '
                    '--per-destination into any one host.  Progress goes '
                    'to stderr (a bar on a terminal, a line per event '
                    'elsewhere, JSON lines with --json); the result to '
                    'stdout: a summary and one row per VM in a table, the '
                    'rows in the other formats, everything with --json.  '
                    'Exit status 1 if any VM is left on HOST.')
    parser.add_argument('host', metavar='HOST',
                        help='compute host to empty (as Nova names it)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the plan, migrate nothing')
    parser.add_argument('--max-concurrent', type=int, default=None,
                        metavar='N', help='live migrations out of HOST at '
                        'a time (default %d)'
                        % evacuation_plan.DEFAULT_MAX_CONCURRENT)
    parser.add_argument('--per-destination', type=int, default=None,
                        metavar='N', help='live migrations into one host at '
                        'a time (default %d)'
                        % evacuation_plan.DEFAULT_PER_DESTINATION)
    parser.add_argument('--config-file', metavar='PATH',
                        default=None,
                        help='the balancer configuration: the agents\' '
                             'sockets, and [nova] credentials unless '
                             '--os-cloud or OS_* give them (default %s)'
                        % opts.DEFAULT_CONFIG_FILE)
    credentials_mod.add_arguments(parser)
    output.add_format_options(parser, listing=True)
    parser.set_defaults(run=run, render=render, status=status)


def load_conf(path, credentials=None):
    """The balancer's configuration from ``path`` (None: the default).

    Without credentials from clouds.yaml or OS_* the file must exist: its
    [nova] has them.  With them a missing default file only means that no
    agent is asked for its caches.
    """
    files = [path or opts.DEFAULT_CONFIG_FILE]
    if not os.path.exists(files[0]):
        if path is not None or credentials is None:
            raise exception.InvalidArgument(
                name='--config-file', value=files[0],
                reason='no such file: it must give [fcache_balancer] '
                       'agent_sockets (or another source) and, without '
                       '--os-cloud or OS_AUTH_URL, [nova] credentials '
                       '(doc/reference/balancing.rst)')
        files = []
    conf = cfg.ConfigOpts()
    opts.register_opts(conf)
    conf([], project='fcache', prog='fcache-evacuate',
         default_config_files=files)
    return conf


def _positive(name, value, default):
    if value is None:
        return default
    if value < 1:
        raise exception.InvalidArgument(name=name, value=value,
                                        reason='must be at least 1')
    return value


class EvacuationProgress(object):
    """The evacuator's ``on_event``, on the shared progress display."""

    def __init__(self, display, total):
        self.display = display
        self.total = total

    def __call__(self, event, result, results):
        counts = {s: sum(1 for r in results if r.state == s)
                  for s in ('pending', 'running', 'done', 'failed')}
        record = {'event': event, 'vm': result.step.vm.id,
                  'destination': result.step.destination,
                  'state': result.state, 'message': result.message}
        record.update(counts)
        detail = '%d failed, %d running; %s %s -> %s' % (
            counts['failed'], counts['running'], event, result.step.vm.id,
            result.step.destination)
        self.display.update('evacuating', counts['done'] + counts['failed'],
                            self.total, detail, record=record)


def make_notifier(conf):
    """fcache.evacuation.* through ``[oslo_messaging_notifications]``.

    A notifier with no driver configured sends nothing (and opens no
    connection).
    """
    # Imported here, and after the filter: oslo.messaging pulls in
    # eventlet, whose deprecation warning fcache would otherwise print on
    # stderr (nova_ext.warnings_filter says why it is filtered).
    warnings_filter.ignore_eventlet_deprecation()
    import oslo_messaging

    transport = oslo_messaging.get_notification_transport(conf)
    notifier = oslo_messaging.Notifier(transport,
                                       publisher_id='fcache.evacuate')
    return notifications.EvacuationNotifier(
        notifier if notifier.is_enabled() else None)


def connect(conf, credentials=None):
    """The Nova view and the host-load source.

    Nova's credentials from ``credentials`` (clouds.yaml, OS_*), else from
    ``[nova]`` of ``conf``.
    """
    return (nova_mod.NovaView.from_conf(conf, credentials),
            sources.load_source(conf))


def run(client, args):
    creds = credentials_mod.chosen(args.os_cloud)
    conf = load_conf(args.config_file, creds)
    group = conf.fcache_balancer
    max_concurrent = _positive('--max-concurrent', args.max_concurrent,
                               evacuation_plan.DEFAULT_MAX_CONCURRENT)
    per_destination = _positive('--per-destination', args.per_destination,
                                evacuation_plan.DEFAULT_PER_DESTINATION)
    nova, source = connect(conf, creds)
    loads, unreachable = source.loads()
    servers = nova.servers()
    enabled = nova.compute_hosts()
    if args.host not in enabled:
        raise exception.InvalidArgument(
            name='HOST', value=args.host,
            reason='Nova has no nova-compute on it (openstack compute '
                   'service list)')
    if args.host not in loads:
        # Its VMs still go; their caches are unknown, so they move none.
        loads[args.host] = sources.HostLoad(args.host, 0)
    hosts, vms = inventory.build(loads, servers, enabled=enabled,
                                 exclude=(args.host,))
    try:
        plan = evacuation_plan.plan_evacuation(
            args.host, hosts, vms, max_concurrent=max_concurrent,
            per_destination=per_destination,
            link_bps=(group.link_mbps or 0) * 1e6 or None,
            origin_bps=(group.origin_mbps or 0) * 1e6 or None,
            threshold=group.threshold)
    except evacuation_plan.EvacuationImpossible as exc:
        raise exception.FcacheException(str(exc))
    result = plan.as_dict()
    result['dry_run'] = args.dry_run
    result['unreachable_agents'] = unreachable
    if args.dry_run:
        for step in result['steps']:
            step['state'] = 'planned'
        return result
    began = time.monotonic()
    display = progress.Progress(sys.stderr, as_json=args.json, unit='VMs')
    notifier = make_notifier(conf)
    evac_progress = EvacuationProgress(display, len(plan.steps))

    def on_event(event, step, results):
        evac_progress(event, step, results)
        if event in ('done', 'failed'):
            notifier.step(step.as_dict())
    notifier.start(result)
    runner = evacuation_run.Evacuator(
        nova, plan, poll_interval=group.poll_interval,
        timeout=group.migration_timeout, on_event=on_event,
        source_agent=source.agent(args.host))
    try:
        results = runner.run()
    finally:
        display.close()
    result['steps'] = [r.as_dict() for r in results]
    result['duration_s'] = round(time.monotonic() - began, 3)
    result['done'] = sum(1 for r in results if r.state == 'done')
    result['failed'] = sum(1 for r in results if r.state == 'failed')
    notifier.end(result)
    return result


def status(result):
    """Exit status: 1 when a VM could not leave the host."""
    return 1 if result.get('failed') or result.get('skipped') else 0


def step_row(step):
    """One VM's row: its volumes and their strategies as lists."""
    volumes = step.get('volumes') or []
    return {'vm': step['vm'], 'vm_name': step.get('vm_name'),
            'destination': step.get('destination'),
            'strategies': [v['strategy'] for v in volumes],
            'wave': step.get('wave'), 'state': step.get('state'),
            'duration_s': step.get('duration_s'),
            'volumes': [v['volume'] for v in volumes],
            'host': step.get('host') or step.get('source'),
            'message': step.get('message') or step.get('reason')}


def render(result, args):
    """A summary and one row per VM (a table); the rows (other formats).

    A VM left out of the plan is a row too, in state ``not moved``.
    """
    rows = [step_row(s) for s in result.get('steps') or []]
    rows += [{'vm': skipped['vm'], 'state': 'not moved',
              'message': skipped['reason']}
             for skipped in result.get('skipped') or []]
    text = output.format_list(args, rows, COLUMNS, LONG_COLUMNS)
    if args.format != 'table':
        return text
    head = {'source': result['source'],
            'max_concurrent': result['max_concurrent'],
            'per_destination': result['per_destination'],
            'link_bytes': result['link_bytes'],
            'storage_bytes': result['storage_bytes'],
            'est_seconds': round(result['est_seconds'], 1)}
    for key in ('done', 'failed', 'duration_s'):
        if key in result:
            head[key] = result[key]
    # Why a VM is still on the host, which the default columns leave out.
    notes = ''.join('%s %s: %s\n' % (row['state'], row['vm'], row['message'])
                    for row in rows if row.get('message') and
                    row.get('state') in ('failed', 'not moved'))
    return output.table_text(head) + (text or 'no VM to move\n') + notes
