# SPDX-License-Identifier: Apache-2.0
"""Exceptions of cinder_ext, with messages an operator can act on."""

from nova_ext import exception as base


class InvalidExtraSpec(base.FcacheException):
    """A ``fcache:*`` extra spec has a value (or a name) we refuse."""

    msg_fmt = ("invalid volume type extra spec %(key)s=%(value)r: "
               "%(reason)s; allowed: %(allowed)s")
