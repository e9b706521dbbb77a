# SPDX-License-Identifier: Apache-2.0
"""Unit tests of nova_ext.opts: the [fcache] options."""

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import pytest

from nova_ext import opts


def test_list_opts():
    [(group, options)] = opts.list_opts()
    assert group.name == 'fcache'
    assert {o.name for o in options} == {
        'agent_socket', 'agent_timeout', 'default_strategy',
        'default_write_policy', 'default_admission', 'default_cache_size',
        # CloudCache's on-demand allocation: RWS_N and the staging area.
        'default_rws_n', 'default_staging',
        # The live-migration options of nova_ext.virt (issue 5).
        'default_rate_limit', 'peer_agent_socket', 'migration_timeout',
        'link_mbps', 'origin_mbps',
        # Each host drives its own agent; the peer socket only settles.
        'migration_address',
        # Live storage moves (issue 18): swap_volume through the agent.
        'default_storage_migration', 'default_medium',
        'default_wear_weight', 'storage_move_timeout',
        'storage_move_poll_interval', 'storage_move_rate_limit',
        # A volume's whole life (issue 28): guests that ride out an agent
        # restart, evacuation away from write_back data.
        'nbd_reconnect_delay', 'evacuate_write_back',
        'ssd_mbps', 'hdd_mbps', 'storage_move_write_mbps',
        # What auto assumes of the VM's requests in flight (issue 35).
        'storage_move_in_flight',
        # Ceph RBD volumes: where their keyrings go, for the agent.
        'rbd_keyring_dir', 'rbd_keyring_group'}


def test_storage_move_defaults_and_bounds(conf):
    assert conf.fcache.default_storage_migration == 'auto'
    assert conf.fcache.default_medium == 'ssd'
    assert conf.fcache.default_wear_weight == 0.5
    assert conf.fcache.storage_move_timeout == 3600
    assert conf.fcache.storage_move_rate_limit == 0
    assert conf.fcache.storage_move_in_flight == 4
    for name, value in (('default_wear_weight', 1.5),
                        ('storage_move_in_flight', 0),
                        ('default_medium', 'nvme'),
                        ('default_storage_migration', 'teleport'),
                        ('storage_move_timeout', 0)):
        with pytest.raises(ValueError):
            conf.set_override(name, value, group='fcache')


def test_list_opts_returns_copies():
    [(_, options)] = opts.list_opts()
    assert all(o is not orig for o, orig in zip(options, opts.FCACHE_OPTS))


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    fixture = config_fixture.Config(conf)
    fixture.setUp()
    opts.register_opts(conf)
    conf([], project='fcache-test', default_config_files=[])
    yield conf
    fixture.cleanUp()


def test_defaults(conf):
    assert conf.fcache.agent_socket == '/run/fcache/agent.sock'
    assert conf.fcache.agent_timeout == 30.0
    assert conf.fcache.default_strategy == 'auto'
    assert conf.fcache.default_write_policy == 'write_through'
    assert conf.fcache.default_admission == 'all'
    assert conf.fcache.default_rws_n == 1
    assert conf.fcache.default_staging == 'hybrid'
    assert conf.fcache.default_cache_size is None
    # No remote control channel unless the operator sets one up.
    assert conf.fcache.peer_agent_socket is None
    assert conf.fcache.migration_address is None
    # One of the agent's default origin_rbd_dirs.
    assert conf.fcache.rbd_keyring_dir == '/run/fcache/ceph'
    assert conf.fcache.rbd_keyring_group is None


def test_strategy_choices():
    by_name = {o.name: o for o in opts.FCACHE_OPTS}
    choices = [c for c, _ in by_name['default_strategy'].type.choices.items()]
    assert choices == ['none', 'cachemior', 'firepan', 'firepan_if',
                       'cloudcache', 'hybrid', 'auto']


@pytest.mark.parametrize('name, value', [
    ('default_strategy', 'warp'),
    ('default_write_policy', 'write_around'),
    ('default_cache_size', '1.5G'),
    ('default_rws_n', 0),
    ('default_rws_n', 8),
    ('default_staging', 'lru'),
    ('agent_timeout', 0),
    ('migration_address', '10.0.0.5'),
    ('migration_address', 'cmp2:port'),
    ('migration_address', '::1:7440'),
])
def test_invalid_values_refused(conf, name, value):
    with pytest.raises(ValueError):
        conf.set_override(name, value, group='fcache')


def test_staging_choices():
    by_name = {o.name: o for o in opts.FCACHE_OPTS}
    choices = [c for c, _ in by_name['default_staging'].type.choices.items()]
    assert choices == ['address', 'data', 'hybrid']


@pytest.mark.parametrize('value', [1, 2, 7])
def test_rws_n_accepts_what_the_agent_tracks(conf, value):
    conf.set_override('default_rws_n', value, group='fcache')
    assert conf.fcache.default_rws_n == value


def test_cache_size_accepts_units(conf):
    conf.set_override('default_cache_size', '2G', group='fcache')
    assert conf.fcache.default_cache_size == '2G'


@pytest.mark.parametrize('value', ['10.0.0.5:7440', 'cmp2.example:7440',
                                   '[fd00::5]:7440'])
def test_migration_address_accepts_host_port(conf, value):
    conf.set_override('migration_address', value, group='fcache')
    assert conf.fcache.migration_address == value
