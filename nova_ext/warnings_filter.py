# SPDX-License-Identifier: Apache-2.0
"""The one warning fcache's commands silence: eventlet's deprecation.

Importing oslo.messaging imports futurist and oslo.service, and both
import eventlet whenever it is installed (futurist to detect green
threads, oslo.service for its default backend); on a host with Nova
installed, eventlet always is.
eventlet warns on import that it is deprecated, so an operator starting
``fcache-balancer`` or running ``fcache evacuate`` with notifications
would read a screenful about a library fcache does not use: the balancer
runs in an OS thread and nothing in fcache monkey-patches.  The import
itself cannot be avoided while notifications go through oslo.messaging,
so the warning is filtered by its text, at the entry points only, before
the import; every other warning still reaches the operator.
"""

import warnings

# The start of eventlet's message (eventlet/__init__.py, _DEPRECATED).
_EVENTLET_DEPRECATED = r'\s*Eventlet is deprecated\.'


def ignore_eventlet_deprecation():
    """Hide eventlet's import-time deprecation warning, and only that."""
    warnings.filterwarnings('ignore', message=_EVENTLET_DEPRECATED,
                            category=Warning)
