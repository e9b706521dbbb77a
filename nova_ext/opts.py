# SPDX-License-Identifier: Apache-2.0
"""Configuration options of fcache, group ``[fcache]`` of nova.conf.

Nothing is registered at import time: services call :func:`register_opts`
on their own ``ConfigOpts``; ``oslo-config-generator`` finds
:func:`list_opts` through the ``oslo.config.opts`` entry point ``fcache``.
"""

import copy

from oslo_config import cfg

from nova_ext import agent
from nova_ext import volume_move

GROUP_NAME = 'fcache'

fcache_group = cfg.OptGroup(
    GROUP_NAME,
    title='fcache options',
    help='Host-side flash cache of Cinder volumes, kept warm across live '
         'migrations by the local fcache-agent.')

STRATEGIES = (
    ('none', 'Move nothing; the destination cache warms up by itself.'),
    ('cachemior', 'Send the hot-block list; the destination preloads those '
                  'blocks from shared storage in the background.'),
    ('firepan', 'Copy every cache block while the VM is paused (adds '
                'downtime proportional to the cache size).'),
    ('firepan_if', 'Copy every cache block while the VM already runs on the '
                   'destination against origin; writes during the copy are '
                   'recorded and invalidated.'),
    ('cloudcache', 'Fetch dirty blocks on demand from the source cache and '
                   'transfer the reuse working set in the background, rate '
                   'limited.'),
    ('hybrid', 'Hottest-first background copy plus on-demand fetch of '
               'not-yet-copied blocks; the cache is usable block by block '
               'from the start.'),
    ('auto', 'Choose one of the above per volume from its write policy and '
             'cache state.'),
)

WRITE_POLICY_CHOICES = (
    ('read_only', 'Cache reads only; writes go to origin and invalidate.'),
    ('write_through', 'Writes go to origin and the cache; acknowledged when '
                      'origin has them.'),
    ('write_back', 'Writes are acknowledged from the cache and flushed to '
                   'origin later; dirty data moves with the VM.'),
)

ADMISSION_CHOICES = (
    ('all', 'Admit every missed block.'),
    ('rws', 'Admit only blocks of the reuse working set (reused blocks).'),
)

STAGING_CHOICES = (
    ('address', 'Stage only the addresses of candidate blocks: the longest '
                'reuse history for the memory.'),
    ('data', 'Stage addresses and the data read: a read reused before '
             'admission is served from memory, but fewer blocks are '
             'tracked.'),
    ('hybrid', 'Split the staging area into an address and a data '
               'partition, each managed LRU (CloudCache\'s choice).'),
)

STORAGE_MIGRATION_CHOICES = (
    ('dbt', 'Dirty block tracking: the VM stays on the old volume, blocks '
            'written behind the copy are copied again in rounds until '
            'they stop shrinking, then the VM pauses for the rest, however '
            'long (seconds towards a slower medium).'),
    ('mirror', 'I/O mirroring: writes to the copied region go to both '
               'volumes at once and complete when both have them.'),
    ('lr', 'Low redundancy: every write goes to the new volume; the copy '
           'skips what the VM wrote. Fewest SSD writes.'),
    ('slr', 'Source-based low redundancy: I/O stays on the old volume '
            'except writes to the copied region.'),
    ('aio', 'Asynchronous mirroring: a write completes on the faster '
            'medium, which also serves reads of the copied region; the '
            'slower one follows within a bound.'),
    ('dbt_capped', 'fcache\'s DBT: its pause is capped (200 ms), and the '
                   'move fails, the VM staying on the old volume, when the '
                   'rounds do not converge. Never chosen by auto.'),
    ('auto', 'The scheme of lowest expected migration cost for the media '
             'and the wear weight '
             '(doc/reference/storage-migration-nova.rst).'),
)

MEDIUM_CHOICES = (
    ('ssd', 'Flash: every write wears it.'),
    ('hdd', 'Spinning disk: no wear.'),
)

FCACHE_OPTS = [
    cfg.StrOpt('agent_socket',
               default=agent.DEFAULT_SOCKET,
               help='Path of the local fcache-agent control socket '
                    '(control_socket in the agent configuration).'),
    cfg.StrOpt('evacuate_write_back',
               default='refuse',
               choices=(
                   ('refuse', 'Fail the evacuation of an instance with a '
                              'write_back volume: the failed host\'s cache '
                              'may hold the only copy of what the guest '
                              'wrote.'),
                   ('discard', 'Evacuate anyway, losing what the failed '
                               'host\'s cache held and the origin lacks; '
                               'logged as an error per volume.'),
               ),
               help='What this host does when asked to rebuild an instance '
                    'evacuated from a failed host and one of its volumes '
                    'is cached write_back there. Set it to discard only '
                    'for the evacuation the loss is accepted for. When the '
                    'failed host returns, its fcache-agent holds the old '
                    'blocks unwritten and its nova-compute drops them as '
                    'it destroys the evacuated instance '
                    '(doc/admin/operations.rst).'),
    cfg.IntOpt('nbd_reconnect_delay',
               default=30,
               min=0,
               max=3600,
               help='Seconds a guest\'s QEMU holds the I/O of an fcache '
                    'disk while the fcache-agent restarts (an upgrade, or '
                    'a crash systemd restarts it after), before failing it '
                    'to the guest. Set on each fcache disk of a guest as '
                    'it starts, is attached a volume, or arrives by live '
                    'migration (QEMU NBD client reconnect-delay). 0: none; '
                    'the guest then sees I/O errors, and loses the writes '
                    'among them, when the agent restarts. Make it longer '
                    'than the agent takes to restart.'),
    cfg.StrOpt('rbd_keyring_dir',
               default='/run/fcache/ceph',
               help='Directory where nova-compute writes the keyring of '
                    'each cached Ceph RBD volume attached here (the cephx '
                    'key of its libvirt secret, one file per volume, '
                    'removed once the volume leaves the host), for the '
                    'fcache-agent to open the image with. It must be one '
                    'of the agent\'s origin_rbd_dirs, writable by '
                    'nova-compute and by no other user, and is created '
                    '(0700, or 0750 with rbd_keyring_group) if missing.'),
    cfg.StrOpt('rbd_keyring_group',
               help='Group given the keyring files, then mode 0640 instead '
                    'of 0600, when the fcache-agent runs as a user other '
                    'than nova-compute\'s and root (the packaged unit\'s '
                    'dynamic user): a group the agent is a member of '
                    '(SupplementaryGroups) and nova-compute too.'),
    cfg.FloatOpt('agent_timeout',
                 default=agent.DEFAULT_TIMEOUT,
                 min=0.1,
                 help='Seconds to wait for the fcache-agent to answer one '
                      'control request.'),
    cfg.StrOpt('default_strategy',
               default='auto',
               choices=STRATEGIES,
               help='Cache migration strategy used on live migration when '
                    'the volume type does not set fcache:strategy.'),
    cfg.StrOpt('default_write_policy',
               default='write_through',
               choices=WRITE_POLICY_CHOICES,
               help='Write policy of a volume cache when the volume type '
                    'does not set fcache:write_policy.'),
    cfg.StrOpt('default_admission',
               default='all',
               choices=ADMISSION_CHOICES,
               help='Admission policy of a volume cache when the volume type '
                    'does not set fcache:admission.'),
    cfg.IntOpt('default_rws_n',
               default=1,
               min=agent.RWS_N_MIN,
               max=agent.RWS_N_MAX,
               help='With admission rws: the number of reuses within the '
                    'window after which a block is admitted (CloudCache '
                    'RWS_N), when the volume type does not set '
                    'fcache:rws_n. 1 or 2 trade the least hit ratio for '
                    'the most saved cache and flash writes.'),
    cfg.StrOpt('default_staging',
               default='hybrid',
               choices=STAGING_CHOICES,
               help='With admission rws: what the in-memory staging area '
                    'keeps of a block not yet admitted, when the volume '
                    'type does not set fcache:staging.'),
    cfg.StrOpt('default_cache_size',
               regex=r'^[0-9]+\s*([KMGTP](i?B)?|B)?$',
               ignore_case=True,
               help='Cache size of one volume when the volume type does not '
                    'set fcache:cache_size: bytes with an optional binary '
                    'unit (4096, 64K, 10M, 2G). Unset: the agent decides.'),
    cfg.FloatOpt('default_rate_limit',
                 default=0.0,
                 min=0.0,
                 help='Cap, in MB/s, of the cache transfer of one volume '
                      'during a live migration when the volume type does '
                      'not set fcache:rate_limit. 0: no cap.'),
    cfg.StrOpt('migration_address',
               regex=r'^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):[0-9]{1,5}$',
               help='host:port at which the other compute hosts reach this '
                    'host\'s fcache-agent migration listener (the agent\'s '
                    'migration_listen). Unset: the address the agent '
                    'reports, with a wildcard host (0.0.0.0, ::) replaced by '
                    '[DEFAULT] my_ip. A live migration hands it to the '
                    'source host with the fingerprint of the certificate '
                    'the agent made for the migration.'),
    cfg.StrOpt('peer_agent_socket',
               help='Control socket of the fcache-agent of another compute '
                    'host, as reachable from this one; {host} is replaced '
                    'by that host\'s Nova host name. Live migrations do not '
                    'need it: each host drives only its own agent. It is '
                    'used for one thing: when a cache migration fails after '
                    'the VM has moved (link cut, destination restarted, '
                    'timeout), the source settles the volume by relaying '
                    'between both agents\' control sockets. Unset (the '
                    'usual case): the source\'s agent settles with the '
                    'destination agent itself, over its migration listener; '
                    'set it only for destination agents older than that. '
                    'If settling fails, both agents hold the volume and the '
                    'operator settles it with "fcache migrate --phase '
                    'settle" (see doc/reference/nova.rst).'),
    cfg.IntOpt('migration_timeout',
               default=600,
               min=1,
               help='Seconds a live migration waits, after the VM has '
                    'moved, for the destination to hold every cache block '
                    'it needs before the source cache is released.'),
    cfg.FloatOpt('link_mbps',
                 min=0.0,
                 help='Bandwidth of the migration network in MB/s, for the '
                      'auto strategy\'s cost model. Unset: 1000.'),
    cfg.FloatOpt('origin_mbps',
                 min=0.0,
                 help='Bandwidth shared storage gives one VM in MB/s, for '
                      'the auto strategy\'s cost model. Unset: 200.'),
    cfg.StrOpt('default_storage_migration',
               default='auto',
               choices=STORAGE_MIGRATION_CHOICES,
               help='Scheme of a live storage move (Cinder migrating or '
                    'retyping an in-use cached volume: Nova\'s swap_volume) '
                    'when the volume type does not set '
                    'fcache:storage_migration.'),
    cfg.StrOpt('default_medium',
               default='ssd',
               choices=MEDIUM_CHOICES,
               help='Medium of a volume whose type does not set '
                    'fcache:medium, for the storage migration cost of the '
                    'auto scheme.'),
    cfg.FloatOpt('default_wear_weight',
                 default=0.5,
                 min=0.0,
                 max=1.0,
                 help='Weight gamma of SSD wear against I/O performance in '
                      'the storage migration cost MC = lambda_time * '
                      '(gamma * lambda_wear + (1 - gamma) * lambda_io), '
                      'when the volume type does not set '
                      'fcache:wear_weight.'),
    cfg.FloatOpt('ssd_mbps',
                 min=0.1,
                 help='Streaming bandwidth of one SSD-backed volume in MB/s, '
                      'for the auto storage move scheme\'s cost model. '
                      'Unset: 180 (Table 1 of Zhou et al.).'),
    cfg.FloatOpt('hdd_mbps',
                 min=0.1,
                 help='Streaming bandwidth of one HDD-backed volume in MB/s, '
                      'for the auto storage move scheme\'s cost model. '
                      'Unset: 95.'),
    cfg.FloatOpt('storage_move_write_mbps',
                 min=0.0,
                 help='What the auto storage move scheme assumes a VM '
                      'writes, in MB/s (it assumes three times as many '
                      'reads). Unset: 10.'),
    cfg.IntOpt('storage_move_in_flight',
               default=volume_move.DEFAULT_DEPTH,
               min=1,
               help='Requests the auto storage move scheme assumes a VM '
                    'keeps in flight: its cost model serves that many at '
                    'once from both media, so auto\'s choice depends on '
                    'it. With 1 every request waits for the slower medium '
                    'in turn and the model never finds SLR\'s balance '
                    'between the two (from SSD to HDD at wear weight 0.5 '
                    'it chooses AIO instead). The default is the smaller '
                    'queue depth of the paper\'s IOmeter runs (Zhou et '
                    'al., Table 7).'),
    cfg.IntOpt('storage_move_timeout',
               default=3600,
               min=1,
               help='Seconds a live storage move may take before it is '
                    'aborted: the old volume keeps serving, and the swap '
                    'fails so that Cinder rolls its migration back.'),
    cfg.FloatOpt('storage_move_poll_interval',
                 default=1.0,
                 min=0.01,
                 help='Seconds between two looks at a storage move\'s '
                      'progress.'),
    cfg.IntOpt('storage_move_rate_limit',
               default=0,
               min=0,
               max=agent.MOVE_RATE_LIMIT_MAX_MBPS,
               help='Cap, in MB/s, of the copy of a live storage move. '
                    '0: no cap.'),
]


def register_opts(conf):
    """Register the ``[fcache]`` options on ``conf`` (a ConfigOpts)."""
    conf.register_group(fcache_group)
    conf.register_opts(FCACHE_OPTS, group=fcache_group)


def list_opts():
    """Return ``[(group, options)]`` for oslo-config-generator."""
    return [(fcache_group, copy.deepcopy(FCACHE_OPTS))]
