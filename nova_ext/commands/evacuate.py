"""``fcache evacuate HOST``: empty a host with its caches kept warm.

Like ``nova host-evacuate-live HOST``, but planned for the caches
(:mod:`nova_ext.balancer.evacuation`): each VM goes, in turn and with
bounded concurrency, to the host that keeps the cache load most even, and
each volume's cache moves by the strategy the cost model picks for it (a
hot cache over the migration link, a cold one not at all), so that the
shared storage is not flooded by caches refilling at once.

It reads the hosts' caches and Nova's credentials from the balancer's
configuration file (``--config-file``, default
/etc/fcache/fcache-balancer.conf: ``[fcache_balancer] source`` and
``agent_sockets``, ``[nova]``).  ``--socket`` is not used.
"""

import json
import os
import sys
import time

from oslo_config import cfg

from nova_ext.balancer import evacuation
from nova_ext.balancer import evacuator
from nova_ext.balancer import inventory
from nova_ext.balancer import nova as nova_mod
from nova_ext.balancer import opts
from nova_ext.balancer import sources
from nova_ext.commands import output
from nova_ext import exception

COLUMNS = ('vm', 'name', 'destination', 'volumes', 'strategies', 'wave',
           'state', 'host', 'seconds', 'message')
BAR_WIDTH = 30


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
                    'to stderr (a bar on a terminal, JSON lines with '
                    '--json); the final table (or JSON) to stdout.  Exit '
                    'status 1 if any VM is left on HOST.')
    parser.add_argument('host', metavar='HOST',
                        help='compute host to empty (as Nova names it)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the plan, migrate nothing')
    parser.add_argument('--max-concurrent', type=int, default=None,
                        metavar='N', help='live migrations out of HOST at '
                        'a time (default %d)'
                        % evacuation.DEFAULT_MAX_CONCURRENT)
    parser.add_argument('--per-destination', type=int, default=None,
                        metavar='N', help='live migrations into one host at '
                        'a time (default %d)'
                        % evacuation.DEFAULT_PER_DESTINATION)
    parser.add_argument('--config-file', metavar='PATH',
                        default=opts.DEFAULT_CONFIG_FILE,
                        help='the balancer configuration (default %s)'
                        % opts.DEFAULT_CONFIG_FILE)
    output.add_format_options(parser, listing=True)
    parser.set_defaults(run=run, render=render, status=status)


def load_conf(path):
    """The balancer's configuration from ``path``."""
    if not os.path.exists(path):
        raise exception.InvalidArgument(
            name='--config-file', value=path,
            reason='no such file: it must give [fcache_balancer] '
                   'agent_sockets (or another source) and [nova] '
                   'credentials (doc/balancing.rst)')
    conf = cfg.ConfigOpts()
    opts.register_opts(conf)
    conf([], project='fcache', prog='fcache-evacuate',
         default_config_files=[path])
    return conf


def _positive(name, value, default):
    if value is None:
        return default
    if value < 1:
        raise exception.InvalidArgument(name=name, value=value,
                                        reason='must be at least 1')
    return value


class Progress(object):
    """Progress on stderr: a bar on a terminal, JSON lines with --json."""

    def __init__(self, stream, as_json, total):
        self.stream = stream
        self.as_json = as_json
        self.total = total
        self.tty = not as_json and stream.isatty()

    def __call__(self, event, result, results):
        counts = {s: sum(1 for r in results if r.state == s)
                  for s in ('pending', 'running', 'done', 'failed')}
        if self.as_json:
            line = {'event': event, 'vm': result.step.vm.id,
                    'destination': result.step.destination,
                    'state': result.state, 'message': result.message}
            line.update(counts)
            self.stream.write(json.dumps(line, sort_keys=True) + '\n')
        else:
            finished = counts['done'] + counts['failed']
            fill = (BAR_WIDTH * finished // self.total) if self.total else 0
            text = '[%s%s] %d/%d done, %d failed, %d running' % (
                '#' * fill, '.' * (BAR_WIDTH - fill), counts['done'],
                self.total, counts['failed'], counts['running'])
            if self.tty:
                self.stream.write('\r' + text + '\x1b[K')
                if finished == self.total:
                    self.stream.write('\n')
            else:
                self.stream.write('%s %s -> %s: %s\n' % (
                    event, result.step.vm.id, result.step.destination,
                    text))
        self.stream.flush()


def connect(conf):
    """The Nova view and the host-load source from the configuration."""
    return (nova_mod.NovaView.from_conf(conf), sources.load_source(conf))


def run(client, args):
    conf = load_conf(args.config_file)
    group = conf.fcache_balancer
    max_concurrent = _positive('--max-concurrent', args.max_concurrent,
                               evacuation.DEFAULT_MAX_CONCURRENT)
    per_destination = _positive('--per-destination', args.per_destination,
                                evacuation.DEFAULT_PER_DESTINATION)
    nova, source = connect(conf)
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
        plan = evacuation.plan_evacuation(
            args.host, hosts, vms, max_concurrent=max_concurrent,
            per_destination=per_destination,
            link_bps=(group.link_mbps or 0) * 1e6 or None,
            origin_bps=(group.origin_mbps or 0) * 1e6 or None,
            threshold=group.threshold)
    except evacuation.EvacuationImpossible as exc:
        raise exception.FcacheException(str(exc))
    result = plan.as_dict()
    result['dry_run'] = args.dry_run
    result['unreachable_agents'] = unreachable
    if args.dry_run:
        for step in result['steps']:
            step['state'] = 'planned'
        return result
    began = time.monotonic()
    runner = evacuator.Evacuator(
        nova, plan, poll_interval=group.poll_interval,
        timeout=group.migration_timeout,
        on_event=Progress(sys.stderr, args.json, len(plan.steps)),
        source_agent=source.agent(args.host))
    results = runner.run()
    result['steps'] = [r.as_dict() for r in results]
    result['duration_s'] = round(time.monotonic() - began, 3)
    result['done'] = sum(1 for r in results if r.state == 'done')
    result['failed'] = sum(1 for r in results if r.state == 'failed')
    return result


def status(result):
    """Exit status: 1 when a VM could not leave the host."""
    return 1 if result.get('failed') or result.get('skipped') else 0


def _row(step):
    volumes = step.get('volumes') or []
    seconds = step.get('duration_s')
    return [step['vm'], step.get('vm_name') or '-', step['destination'],
            ','.join(v['volume'] for v in volumes) or '-',
            ','.join(v['strategy'] for v in volumes) or '-',
            str(step.get('wave')), step.get('state', '-'),
            step.get('host') or step.get('source') or '-',
            '-' if seconds is None else '%.1f' % seconds,
            step.get('message') or step.get('reason') or '']


def render(result, args):
    head = {'source': result['source'],
            'max_concurrent': result['max_concurrent'],
            'per_destination': result['per_destination'],
            'link_bytes': output.format_bytes(result['link_bytes']),
            'storage_bytes': output.format_bytes(result['storage_bytes']),
            'est_seconds': '%.1f' % result['est_seconds']}
    for key in ('done', 'failed', 'duration_s'):
        if key in result:
            head[key] = result[key]
    text = output.format_table(head)
    steps = result.get('steps') or []
    if not steps:
        text += 'no VM to move\n'
    else:
        text += '\n' + output.format_grid(COLUMNS,
                                          [_row(s) for s in steps])
    for skipped in result.get('skipped') or []:
        text += 'not moved: %s (%s)\n' % (skipped['vm'], skipped['reason'])
    return text
