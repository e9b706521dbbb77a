# SPDX-License-Identifier: Apache-2.0
"""fcache's version, as pbr gives it from the git tag at build time.

The agent, fcache-replay, ``fcache``, ``fcache-balancer`` and the release
notes all carry this one string (tools/version.sh computes it for the C
side).
"""
import pbr.version

version_info = pbr.version.VersionInfo('fcache')


def version_string():
    """The full version, e.g. ``1.2.0`` or ``1.2.1.dev3`` between tags."""
    return version_info.release_string()
