# SPDX-License-Identifier: Apache-2.0
"""What the services stand on: MariaDB, RabbitMQ and a one-OSD Ceph.

Each runs as the box's own instance (its own data directory, socket and
ports, on the bridge address), never Debian's system service, which the
packages install stopped: ``down`` stops only what ``up`` started.
"""

import os
import shutil

from cloudbox import layout
from cloudbox import procs

DATABASES = ('keystone', 'placement', 'glance', 'neutron', 'nova_api',
             'nova', 'nova_cell0', 'cinder')
EPMD_PORT = '4370'


def _mysql_run(box):
    # mariadbd runs as mysql: its socket and pid file need a directory of
    # that user's.
    return os.path.join(box.data, 'mysql-run')


def _mysql_socket(box):
    return os.path.join(_mysql_run(box), 'mysql.sock')


def mysql(box, sql):
    return procs.run(['mariadb', '--no-defaults', '-S', _mysql_socket(box),
                      '-uroot', '-e', sql], 'mariadb')


def start_mariadb(box):
    datadir = os.path.join(box.data, 'mysql')
    if not os.path.isdir(os.path.join(datadir, 'mysql')):
        shutil.rmtree(datadir, ignore_errors=True)
        os.makedirs(datadir)
        shutil.chown(datadir, 'mysql', 'mysql')
        procs.run(['mariadb-install-db', '--no-defaults', '--user=mysql',
                   '--datadir=' + datadir, '--skip-test-db',
                   '--auth-root-authentication-method=socket'],
                  'mariadb-install-db', log=box.log('mariadb-install'))
    os.makedirs(_mysql_run(box), exist_ok=True)
    shutil.chown(_mysql_run(box), 'mysql', 'mysql')
    # The box's data are throwaway: no fsync per commit.
    procs.start(box, 'mariadb', [
        'mariadbd', '--no-defaults', '--user=mysql', '--datadir=' + datadir,
        '--socket=' + _mysql_socket(box),
        '--pid-file=' + os.path.join(_mysql_run(box), 'mariadbd.pid'),
        '--port=%d' % layout.PORTS['mariadb'],
        '--bind-address=' + layout.CONTROLLER_IP,
        '--skip-name-resolve', '--skip-log-bin', '--max-connections=1000',
        '--innodb-buffer-pool-size=256M',
        '--innodb-flush-log-at-trx-commit=0', '--innodb-doublewrite=0',
        '--character-set-server=utf8mb4',
        '--collation-server=utf8mb4_general_ci'])
    procs.wait_for(lambda: os.path.exists(_mysql_socket(box)) and
                   mysql(box, 'SELECT 1') is not None, 60,
                   "MariaDB's socket", box, 'mariadb')
    statements = ["CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s'"
                  % (layout.DB_USER, layout.PASSWORD)]
    for db in DATABASES:
        statements.append('CREATE DATABASE IF NOT EXISTS %s' % db)
        statements.append("GRANT ALL ON %s.* TO '%s'@'%%'"
                          % (db, layout.DB_USER))
    mysql(box, '; '.join(statements))


def _rabbit_env(box):
    base = os.path.join(box.data, 'rabbitmq')
    conf_dir = os.path.join(box.etc, 'rabbitmq')
    return {
        'HOME': base,
        'RABBITMQ_NODENAME': 'fcbox@localhost',
        'RABBITMQ_NODE_IP_ADDRESS': layout.CONTROLLER_IP,
        'RABBITMQ_NODE_PORT': str(layout.PORTS['rabbitmq']),
        'RABBITMQ_DIST_PORT': '25679',
        'RABBITMQ_MNESIA_BASE': os.path.join(base, 'mnesia'),
        'RABBITMQ_LOG_BASE': os.path.join(box.logs, 'rabbitmq'),
        'RABBITMQ_CONFIG_FILE': os.path.join(conf_dir, 'rabbitmq'),
        'RABBITMQ_ENABLED_PLUGINS_FILE': os.path.join(conf_dir,
                                                      'enabled_plugins'),
        'RABBITMQ_PID_FILE': os.path.join(box.run, 'rabbitmq-server.pid'),
        'ERL_EPMD_PORT': EPMD_PORT,
        'ERL_EPMD_ADDRESS': '127.0.0.1',
        'RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS':
            '-kernel inet_dist_use_interface {127,0,0,1}',
    }


def rabbitmqctl(box, *args):
    return procs.run(['/usr/lib/rabbitmq/bin/rabbitmqctl'] + list(args),
                     'rabbitmqctl', env=_rabbit_env(box))


def start_rabbitmq(box):
    env = _rabbit_env(box)
    conf_dir = os.path.join(box.etc, 'rabbitmq')
    os.makedirs(conf_dir, exist_ok=True)
    os.makedirs(env['HOME'], exist_ok=True)
    os.makedirs(env['RABBITMQ_LOG_BASE'], exist_ok=True)
    with open(env['RABBITMQ_ENABLED_PLUGINS_FILE'], 'w') as f:
        f.write('[].\n')
    with open(env['RABBITMQ_CONFIG_FILE'] + '.conf', 'w') as f:
        f.write('loopback_users = none\nlog.console = true\n'
                'log.file = false\n')
    # Its own epmd, on loopback, on a port no system Erlang uses: stopped
    # with the box (an epmd the node started itself would outlive it).
    procs.start(box, 'epmd', ['epmd', '-port', EPMD_PORT, '-address',
                              '127.0.0.1'])
    procs.wait_for(lambda: procs.port_open('127.0.0.1', int(EPMD_PORT)), 20,
                   "epmd's port", box, 'epmd')
    procs.start(box, 'rabbitmq', ['/usr/lib/rabbitmq/bin/rabbitmq-server'],
                env=env)
    procs.wait_for(lambda: procs.port_open(layout.CONTROLLER_IP,
                                           layout.PORTS['rabbitmq']), 90,
                   "RabbitMQ's port", box, 'rabbitmq')
    users = rabbitmqctl(box, 'list_users', '-q')
    if not any(line.split()[:1] == [layout.DB_USER]
               for line in users.splitlines()):
        rabbitmqctl(box, 'add_user', layout.DB_USER, layout.PASSWORD)
    rabbitmqctl(box, 'set_permissions', layout.DB_USER, '.*', '.*', '.*')


def _ceph_box(*args):
    return [os.path.join(layout.ROOT, 'tools', 'ceph-box.sh')] + list(args)


def start_ceph(box):
    running = os.path.exists(os.path.join(box.ceph, 'ceph.conf'))
    if running:
        try:
            procs.run(['ceph', '--conf', os.path.join(box.ceph, 'ceph.conf'),
                       '--id', 'admin', '--connect-timeout', '5', 'health'],
                      'ceph health', timeout=15)
            return
        except (procs.BoxError, Exception):
            procs.run(_ceph_box('stop', box.ceph), 'ceph-box stop')
            shutil.rmtree(box.ceph)
    procs.run(_ceph_box('start', box.ceph, '6G'), 'ceph-box start',
              env={'CEPH_BOX_ADDR': layout.CONTROLLER_IP,
                   'CEPH_BOX_STANDARD_PORTS': '1'})


def stop_ceph(box):
    if os.path.exists(os.path.join(box.ceph, 'ceph.conf')):
        procs.run(_ceph_box('stop', box.ceph), 'ceph-box stop')


def ceph_key(box, user):
    path = os.path.join(box.ceph, 'ceph.client.%s.keyring' % user)
    with open(path) as f:
        for line in f:
            if line.strip().startswith('key ='):
                return line.split('=', 1)[1].strip()
    raise procs.BoxError('no key in %s' % path)
