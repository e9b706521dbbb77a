# SPDX-License-Identifier: Apache-2.0
"""Byte sizes as operators write them.

The agent's configuration uses the same syntax (``fc_parse_size`` in
fcache_agent/src/common/config.h): a decimal number with an optional binary
unit K, M, G, T or P, optionally followed by ``iB`` or ``B``: ``4096``, ``4K``,
``10M``, ``2GiB``, ``1T``.  Units are powers of 1024.
"""

import re

Ki = 1024
Mi = Ki * 1024
Gi = Mi * 1024
Ti = Gi * 1024
Pi = Ti * 1024

U64_MAX = 2 ** 64 - 1

_MULTIPLIERS = {'': 1, 'K': Ki, 'M': Mi, 'G': Gi, 'T': Ti, 'P': Pi}
_SIZE_RE = re.compile(r'^([0-9]+)\s*(?:([KMGTP])(?:i?B)?|B)?$', re.IGNORECASE)


def parse_size(text):
    """Return the number of bytes ``text`` names.

    :raises ValueError: with a message naming the accepted syntax when
        ``text`` is malformed, zero, or does not fit in 64 bits.
    """
    match = _SIZE_RE.match(str(text).strip())
    if not match:
        raise ValueError("expected a number of bytes with an optional unit "
                         "K, M, G, T or P (e.g. 4096, 64K, 10M, 2G)")
    number, unit = match.groups()
    size = int(number) * _MULTIPLIERS[(unit or '').upper()]
    if size == 0:
        raise ValueError("size must be greater than zero")
    if size > U64_MAX:
        raise ValueError("size does not fit in 64 bits")
    return size


def format_size(size):
    """Return ``size`` bytes in a short human form, e.g. ``1.5 GiB``."""
    for unit, factor in (('PiB', Pi), ('TiB', Ti), ('GiB', Gi),
                         ('MiB', Mi), ('KiB', Ki)):
        if size >= factor:
            return "%.1f %s" % (size / factor, unit)
    return "%d B" % size
