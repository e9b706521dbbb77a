# SPDX-License-Identifier: Apache-2.0
"""The ``fcache:`` volume-type extra-spec namespace.

One :class:`Validator` per key, declared in :data:`VALIDATORS`, in the shape
of Nova's flavor extra-spec validators: a name, a description an operator can
read, and what values are allowed.  :func:`validate` checks one key,
:func:`validate_specs` every ``fcache:`` key of a dict (other keys are not
ours and are left alone).  Each returns the typed value(s)::

    >>> validate_specs({'fcache:cache_size': '2G', 'volume_backend_name': 'x'})
    {'fcache:cache_size': 2147483648}
"""

from nova_ext import units
from nova_ext import vocabulary

from cinder_ext import exception

PREFIX = 'fcache:'

# The strategies built into fcache.  The operator may add more as stevedore
# plugins (namespace ``fcache.strategies``); :func:`strategy_names` lists
# both, so a plugin's name is a valid fcache:strategy once it is installed
# on the host that validates.
BUILTIN_STRATEGIES = vocabulary.STRATEGIES + ('auto',)
STRATEGY_NAMESPACE = 'fcache.strategies'
WRITE_POLICIES = vocabulary.WRITE_POLICIES
ADMISSIONS = vocabulary.ADMISSIONS
STAGINGS = vocabulary.STAGING_KINDS
STORAGE_MIGRATIONS = vocabulary.MOVE_SCHEMES + ('auto',)
MEDIA = ('ssd', 'hdd')

# CloudCache finds 1 or 2 the best trade-off between hit ratio, cache use
# and flash wear; the agent takes up to this.
RWS_N_MAX = vocabulary.RWS_N_MAX
# 1 TB/s: anything above is a typo, not a rate limit.
RATE_LIMIT_MAX_MBPS = 1000 * 1000


def strategy_names():
    """Built-in strategies plus those installed as ``fcache.strategies``."""
    from importlib import metadata
    names = set(BUILTIN_STRATEGIES)
    for ep in metadata.entry_points(group=STRATEGY_NAMESPACE):
        names.add(ep.name)
    # Keep the documented order first, plugins after, sorted.
    return BUILTIN_STRATEGIES + tuple(sorted(names - set(BUILTIN_STRATEGIES)))


class Validator(object):
    """Declares one extra-spec key.

    :param name: the key without the ``fcache:`` prefix.
    :param description: one sentence for documentation and ``fcache`` help.
    :param allowed: a short text of what is allowed (for error messages), or
        a callable returning a tuple of choices (checked exactly).
    :param parse: callable ``str -> value`` raising ValueError with a reason.
    """

    def __init__(self, name, description, allowed, parse=None):
        self.name = name
        self.key = PREFIX + name
        self.description = description
        self._allowed = allowed
        self._parse = parse

    @property
    def choices(self):
        return self._allowed() if callable(self._allowed) else None

    @property
    def allowed(self):
        choices = self.choices
        if choices is not None:
            return 'one of ' + ', '.join(choices)
        return self._allowed

    def validate(self, value):
        """Return the typed value; raise InvalidExtraSpec naming the key."""
        text = value if isinstance(value, str) else str(value)
        text = text.strip()
        try:
            if self.choices is not None:
                if text not in self.choices:
                    raise ValueError('not a known value')
                return text
            return self._parse(text)
        except ValueError as exc:
            raise exception.InvalidExtraSpec(key=self.key, value=value,
                                             reason=str(exc),
                                             allowed=self.allowed)


def _choices(values):
    return lambda: values


def _int_range(lo, hi):
    def parse(text):
        try:
            number = int(text, 10)
        except ValueError:
            raise ValueError('not an integer')
        if not lo <= number <= hi:
            raise ValueError('out of range')
        return number
    return parse


def _float_range(lo, hi):
    def parse(text):
        try:
            number = float(text)
        except ValueError:
            raise ValueError('not a number')
        # NaN compares false with everything: refuse it here.
        if not lo <= number <= hi:
            raise ValueError('out of range')
        return number
    return parse


VALIDATORS = {v.key: v for v in (
    Validator('strategy',
              'Cache migration strategy used when a VM using the volume '
              'live-migrates (auto: chosen per migration by the cost model).',
              strategy_names),
    Validator('cache_size',
              'Host cache reserved for the volume: bytes with an optional '
              'binary unit.',
              'a positive size such as 4096, 64K, 512M, 10G (units are '
              'powers of 1024)',
              units.parse_size),
    Validator('write_policy',
              'How writes are cached.', _choices(WRITE_POLICIES)),
    Validator('admission',
              'Which missed blocks enter the cache: every one, or only '
              'blocks of the reuse working set.', _choices(ADMISSIONS)),
    Validator('rws_n',
              'With admission rws: a block enters the cache once reused '
              'this many times within the window (CloudCache RWS_N).',
              'an integer from 1 to %d (the agent tracks reuses up to '
              'RWS_%d; 1 or 2 are the usual choices)' % (RWS_N_MAX,
                                                         RWS_N_MAX),
              _int_range(1, RWS_N_MAX)),
    Validator('staging',
              'With admission rws: what the in-memory staging area keeps of '
              'a block not yet admitted: its address only, its address and '
              'read data (reads served from memory), or both in separate '
              'partitions (hybrid).',
              _choices(STAGINGS)),
    Validator('rate_limit',
              'Bandwidth cap of the cache transfer during a live migration, '
              'in MB/s (10^6 bytes per second); 0 means no limit.',
              'a number of MB/s from 0 to %d' % RATE_LIMIT_MAX_MBPS,
              _float_range(0, RATE_LIMIT_MAX_MBPS)),
    Validator('storage_migration',
              'Scheme used when the volume itself moves between media '
              '(Cinder retype/migrate of an in-use volume; auto: the lowest '
              'expected migration cost for the wear weight).',
              _choices(STORAGE_MIGRATIONS)),
    Validator('medium',
              'Medium of the volumes of this type (their backend): ssd '
              'wears with every write, hdd does not; the storage migration '
              'cost counts the writes a move sends to an SSD.',
              _choices(MEDIA)),
    Validator('wear_weight',
              'Weight gamma of flash wear against I/O interference in the '
              'storage migration cost MC = time * (gamma*wear + '
              '(1-gamma)*IO).',
              'a number from 0 to 1', _float_range(0.0, 1.0)),
)}


def is_fcache_key(key):
    return isinstance(key, str) and key.startswith(PREFIX)


def validate(key, value):
    """Validate one ``fcache:`` key; return its typed value."""
    validator = VALIDATORS.get(key)
    if validator is None:
        raise exception.InvalidExtraSpec(
            key=key, value=value, reason='unknown fcache key',
            allowed='keys ' + ', '.join(sorted(VALIDATORS)))
    return validator.validate(value)


def validate_specs(specs):
    """Validate every ``fcache:`` key of ``specs``; return them typed.

    Keys outside the namespace are ignored (Cinder and drivers own them).
    The first invalid key raises; nothing is partially accepted.
    """
    return {key: validate(key, value)
            for key, value in sorted((specs or {}).items())
            if is_fcache_key(key)}
