#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# pyproject.toml: the wheel built through pbr's PEP 517 backend (pbr.build)
# carries pbr's version and every package, Nova's driver module included.
# Without build isolation, so that it needs .venv's pbr and setuptools
# and no download.

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

@test "pip wheel: pbr.build makes fcache-VERSION with nova_ext, cinder_ext and nova/virt/fcache" {
    grep -qx 'build-backend = "pbr.build"' "$REPO/pyproject.toml"
    version=$("$REPO/tools/version.sh")
    out=$BATS_TEST_TMPDIR/wheel
    (cd "$REPO" && .venv/bin/pip wheel -q --no-deps --no-build-isolation -w "$out" .)
    whl=$out/fcache-$version-py3-none-any.whl
    [ -f "$whl" ] || { ls "$out"; false; }
    python3 - "$whl" <<'PY'
import sys
import zipfile

names = set(zipfile.ZipFile(sys.argv[1]).namelist())
for want in ('nova_ext/cli.py', 'cinder_ext/api.py', 'nova/virt/fcache/__init__.py',
             'fcache_tempest_plugin/plugin.py'):
    assert want in names, want
entry = [n for n in names if n.endswith('.dist-info/entry_points.txt')]
assert len(entry) == 1, names
scripts = zipfile.ZipFile(sys.argv[1]).read(entry[0]).decode().splitlines()
assert 'fcache = nova_ext.cli:main' in scripts, scripts
assert 'fcache-balancer = nova_ext.balancer.service:main' in scripts, scripts
PY
}
