# SPDX-License-Identifier: Apache-2.0
"""Synthetic block traces for the on-demand cache allocation evaluation.

The shapes follow the workloads CloudCache (FAST'16) discusses in its
section 4: zipf-like reuse over a hot set, a hot set that drifts over time,
periodic long backup scans, and a mix of several VMs with different
demands.  :mod:`bench.traces.shapes` makes the request streams,
:mod:`bench.traces.formats` writes and reads them (the replayer's CSV and
libCacheSim's oracleGeneral), :mod:`bench.traces.generate` is the command
line (``python3 -m bench.traces.generate --help``).
"""
