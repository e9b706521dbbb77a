"""What every fcache test class checks before it runs."""

from tempest import config

CONF = config.CONF


def skip_unless_deployed(cls):
    """Raise the class's skip exception unless fcache is in this cloud."""
    if not CONF.service_available.fcache:
        raise cls.skipException('fcache is not deployed '
                                '([service_available] fcache)')
