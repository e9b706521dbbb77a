# SPDX-License-Identifier: Apache-2.0
"""dmcache benchmark: boots user-mode-linux and runs bench/dmcache_guest.py.

Prints the guest's ``BENCH`` lines (medians of ``--runs`` runs, ratios
against the peer measured in the same run) and writes them to
results/dmcache-<timestamp>.json.  See doc/reference/dmcache.rst.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from fcache_testkit.uml import umlvm  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--runs', type=int, default=3)
    p.add_argument('--agent', default=os.path.join(
        ROOT, 'fcache_agent', 'build', 'fcache-agent'),
        help='a plain (not sanitizer) build of fcache-agent')
    args = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix='fcbench-dm-')
    try:
        vm = umlvm.UmlVM(work, disks=[('origin', 64 << 20),
                                      ('flash_a', 48 << 20),
                                      ('flash_b', 48 << 20)])
        res = vm.run('python3 %s %d' % (
            os.path.join(ROOT, 'bench', 'dmcache_guest.py'), args.runs),
            env={'FCACHE_AGENT': os.path.abspath(args.agent)},
            timeout=900, cwd=ROOT)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = res.output.splitlines()
    result = [ln for ln in lines if ln.startswith('RESULT ')]
    if res.rc or not result:
        sys.stderr.write(res.output[-4000:])
        return 1
    for ln in lines:
        if ln.startswith('BENCH '):
            print(ln[len('BENCH '):])
    data = json.loads(result[-1][len('RESULT '):])
    data['kernel'] = umlvm.kernel_version()
    os.makedirs(os.path.join(ROOT, 'results'), exist_ok=True)
    path = os.path.join(ROOT, 'results', 'dmcache-%s.json' %
                        time.strftime('%Y%m%d-%H%M%S'))
    with open(path, 'w') as f:
        json.dump(data, f, indent=1, sort_keys=True)
    print('written to %s' % os.path.relpath(path, ROOT))
    return 0


if __name__ == '__main__':
    sys.exit(main())
