# SPDX-License-Identifier: Apache-2.0
"""Cache-aware balancing and host evacuation (CloudCache section 6).

The decisions live in I/O-free modules (:mod:`.model`, :mod:`.decision`,
:mod:`.evacuation`) so that the service, the ``fcache evacuate`` command
and the fleet simulation in bench/fleet run the same code.
"""
