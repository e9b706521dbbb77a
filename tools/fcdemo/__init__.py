# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the fcache demo (tools/testbed.py) and the benchmarks.

Not installed and not part of the product: this package only drives the
real programs (fcache-agent, nbdkit, fio) as a user would.
"""
