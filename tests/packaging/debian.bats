#!/usr/bin/env bats
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (debian/) and `make install`, as an operator gets
# them: dpkg-buildpackage builds fcache-agent and python3-fcache from a
# copy of the tree (the build's clean step would wipe fcache_agent/build,
# which the other suites use), dpkg-deb -x unpacks them without touching
# the machine's root, and the unpacked agent, started on the packaged
# sample configuration, answers the packaged `fcache agent-status`.  Needs
# the build dependencies of debian/control (tools/setup.sh).

REPO=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)

setup_file() {
    W=$(mktemp -d /tmp/fcache-pkg.XXXXXX)
    export W
    VERSION=$("$REPO/tools/version.sh")
    export VERSION
    mkdir "$W/src"
    (cd "$REPO" && git ls-files -co --exclude-standard -z |
        xargs -0 cp -a --parents -t "$W/src")
    # Debian's python3 and tools only (not a pyenv or venv first on PATH);
    # the copy has no .git, so the version is handed over as pbr reads it.
    (cd "$W/src" && env PATH=/usr/sbin:/usr/bin:/sbin:/bin PBR_VERSION="$VERSION" \
        DEB_BUILD_OPTIONS="parallel=2 nocheck" dpkg-buildpackage -us -uc -b) \
        >"$W/build.log" 2>&1 || { tail -40 "$W/build.log" >&3; return 1; }
    mkdir "$W/root"
    for deb in "$W"/fcache-agent_*.deb "$W"/python3-fcache_*_all.deb; do
        dpkg-deb -x "$deb" "$W/root"
    done
}

teardown_file() {
    rm -rf "$W"
}

teardown() {
    if [[ -f "$BATS_TEST_TMPDIR/agent.pid" ]]; then
        kill "$(cat "$BATS_TEST_TMPDIR/agent.pid")" 2>/dev/null || true
    fi
}

# py_run SCRIPT ARGS... - a packaged console script on the unpacked tree,
# with .venv's interpreter for the dependencies the package depends on
py_run() {
    PYTHONPATH="$W/root/usr/lib/python3/dist-packages" \
        "$REPO/.venv/bin/python" "$W/root/usr/bin/$1" "${@:2}"
}

@test "the packages hold the agent, its unit, man pages, sample config and the Python side" {
    R=$W/root
    [ -x "$R/usr/bin/fcache-agent" ]
    [ -x "$R/usr/bin/fcache-replay" ]
    [ -f "$R/usr/share/man/man8/fcache-agent.8.gz" ]
    [ -f "$R/usr/share/man/man1/fcache.1.gz" ]
    [ -f "$R/usr/share/fcache/agent.conf.sample" ]
    [ -f "$R/lib/systemd/system/fcache-agent.service" ]
    grep -qx 'ExecStart=/usr/bin/fcache-agent --config /etc/fcache/agent.conf' \
        "$R/lib/systemd/system/fcache-agent.service"
    grep -qx 'Type=notify' "$R/lib/systemd/system/fcache-agent.service"
    [ -f "$R/usr/lib/python3/dist-packages/nova_ext/cli.py" ]
    [ -f "$R/usr/lib/python3/dist-packages/cinder_ext/api.py" ]
    [ -x "$R/usr/bin/fcache" ]
    [ -x "$R/usr/bin/fcache-balancer" ]
    # Built with dpkg-buildflags' hardening: full RELRO and BIND_NOW.
    readelf -d "$R/usr/bin/fcache-agent" | grep -q 'BIND_NOW'
    readelf -lW "$R/usr/bin/fcache-agent" | grep -q 'GNU_RELRO'
    # The agent's shared libraries are declared dependencies.
    dpkg-deb -f "$W"/fcache-agent_*.deb Depends | grep -q 'libnbd0'
    dpkg-deb -f "$W"/python3-fcache_*_all.deb Depends | grep -q 'python3-oslo.config'
}

@test "every program prints the one version, pbr's: $VERSION" {
    [ -n "$VERSION" ]
    [ "$("$W/root/usr/bin/fcache-agent" --version)" = "$VERSION" ]
    [ "$("$W/root/usr/bin/fcache-replay" --version)" = "$VERSION" ]
    [ "$(py_run fcache --version)" = "$VERSION" ]
    [ "$(py_run fcache-balancer --version 2>/dev/null)" = "$VERSION" ]
}

@test "the packaged agent starts on the sample configuration and answers agent-status" {
    D=$BATS_TEST_TMPDIR
    mkdir -p "$D/run" "$D/state"
    # The sample comments every key out; these point it at $D.
    { cat "$W/root/usr/share/fcache/agent.conf.sample"
      echo "control_socket = $D/run/agent.sock"
      echo "state_dir = $D/state"
      echo "cache_path = $D/state/cache.img"
      echo "cache_size = 16M"
      echo "export_dir = $D/run/exports"
      echo "migration_listen = 127.0.0.1:$((20000 + RANDOM % 20000))"
    } >"$D/agent.conf"
    "$W/root/usr/bin/fcache-agent" --config "$D/agent.conf" >"$D/agent.log" 2>&1 &
    echo $! >"$D/agent.pid"
    for _ in $(seq 100); do
        [[ -S "$D/run/agent.sock" ]] && break
        sleep 0.1
    done
    [ -S "$D/run/agent.sock" ] || { cat "$D/agent.log"; false; }
    run py_run fcache --socket "$D/run/agent.sock" agent-status --json
    [ "$status" -eq 0 ] || { echo "$output"; cat "$D/agent.log"; false; }
    echo "$output" | python3 -c '
import json, sys
status = json.load(sys.stdin)
assert status["version"] == sys.argv[1], status
assert status["engine"] == "ucache", status' "$VERSION"
}

@test "make install: DESTDIR, PREFIX, BINDIR; the unit runs the installed agent" {
    D=$BATS_TEST_TMPDIR/dest
    make -s -C "$W/src/fcache_agent" install DESTDIR="$D" PREFIX=/opt/fc \
        BINDIR=/opt/fc/sbin FCACHE_VERSION="$VERSION" \
        MANPAGES="$W/src/fcache_agent/build/man" CC=cc >/dev/null
    [ -x "$D/opt/fc/sbin/fcache-agent" ]
    [ -x "$D/opt/fc/sbin/fcache-replay" ]
    [ -f "$D/opt/fc/share/man/man8/fcache-agent.8" ]
    [ -f "$D/opt/fc/share/man/man1/fcache.1" ]
    [ -f "$D/opt/fc/share/fcache/agent.conf.sample" ]
    [ -f "$D/opt/fc/share/fcache/systemd/dmcache.conf" ]
    unit=$D/opt/fc/lib/systemd/system/fcache-agent.service
    exec_start=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$unit")
    [ "$exec_start" = /opt/fc/sbin/fcache-agent ]
    [ -x "$D$exec_start" ]
    [ "$("$D$exec_start" --version)" = "$VERSION" ]
    # Nothing outside DESTDIR.
    [ -z "$(find "$D" -mindepth 1 -maxdepth 1 ! -name opt)" ]
}
