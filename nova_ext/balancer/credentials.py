# SPDX-License-Identifier: Apache-2.0
"""Where ``fcache evacuate`` and ``fcache-balancer`` find Nova's credentials.

The OpenStack client's ways first, then the configuration file:

1. ``--os-cloud NAME`` (or ``$OS_CLOUD``): the cloud ``NAME`` of
   clouds.yaml (``./clouds.yaml``, ``~/.config/openstack/``,
   ``/etc/openstack/``, or ``$OS_CLIENT_CONFIG_FILE``), with its
   secure.yaml;
2. ``$OS_AUTH_URL`` and the other ``OS_*`` variables of an openrc file;
3. ``[nova]`` of the balancer's configuration file (keystoneauth's
   ``auth_type``, ``auth_url``, ... options), as a service has them.

openstacksdk's configuration loader reads 1 and 2 and builds the
keystoneauth session with keystoneauth's own plugin loaders, so every
``auth_type`` keystoneauth knows works here as in ``openstack``.
"""

import os
import warnings

from nova_ext import exception

CLOUD_ENV = 'OS_CLOUD'
AUTH_URL_ENV = 'OS_AUTH_URL'


def add_arguments(parser, environ=None):
    """Add ``--os-cloud`` to an argparse ``parser``."""
    environ = os.environ if environ is None else environ
    parser.add_argument(
        '--os-cloud', metavar='NAME', default=environ.get(CLOUD_ENV),
        help='take the Nova credentials from cloud NAME of clouds.yaml '
             '(default: $OS_CLOUD; else the OS_* variables when '
             '$OS_AUTH_URL is set; else [nova] of --config-file)')


class Credentials(object):
    """A cloud of clouds.yaml (``cloud``), or the OS_* variables (None)."""

    def __init__(self, cloud=None):
        self.cloud = cloud

    def describe(self):
        if self.cloud:
            return 'cloud %s of clouds.yaml' % self.cloud
        return 'the OS_* environment variables'

    def region(self):
        """openstacksdk's CloudRegion: the session and the endpoint."""
        from openstack import config as os_config
        from openstack import exceptions as os_exceptions
        from openstack import warnings as os_warnings
        try:
            with warnings.catch_warnings():
                # openstacksdk 4.x warns that InfluxDB metrics are
                # deprecated whenever it builds a cloud region, even one
                # whose clouds.yaml configures no InfluxDB: the operator
                # could do nothing about it.  Only that warning is hidden.
                warnings.filterwarnings(
                    'ignore', message='Support for InfluxDB',
                    category=os_warnings.RemovedInSDK60Warning)
                return os_config.get_cloud_region(
                    cloud=self.cloud, load_yaml_config=True,
                    load_envvars=True)
        except (os_exceptions.ConfigException, KeyError) as exc:
            raise exception.InvalidArgument(
                name='--os-cloud' if self.cloud else '$OS_AUTH_URL',
                value=self.cloud or os.environ.get(AUTH_URL_ENV),
                reason='%s (looked in %s)' % (exc, self.describe()))

    def nova_kwargs(self):
        """``(session, novaclient keyword arguments)``."""
        region = self.region()
        kwargs = {}
        if region.region_name:
            kwargs['region_name'] = region.region_name
        interface = region.get_interface('compute')
        if interface:
            kwargs['endpoint_type'] = interface
        endpoint = region.get_endpoint('compute')
        if endpoint:
            kwargs['endpoint_override'] = endpoint
        return region.get_session(), kwargs


def chosen(os_cloud=None, environ=None):
    """The credentials the options and environment name, or None.

    None means the configuration file's ``[nova]`` group.
    """
    environ = os.environ if environ is None else environ
    cloud = os_cloud or environ.get(CLOUD_ENV)
    if cloud:
        return Credentials(cloud)
    if environ.get(AUTH_URL_ENV):
        return Credentials(None)
    return None
