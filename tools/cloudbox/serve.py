# SPDX-License-Identifier: Apache-2.0
"""Serve one OpenStack WSGI application with gunicorn.

    python -m cloudbox.serve NAME ADDRESS:PORT MODULE:APP [ARG...]

The services' WSGI modules read their configuration from the environment
(OS_<SERVICE>_CONFIG_DIR) or, Cinder's, from sys.argv: sys.argv becomes
``NAME ARG...`` before the module is imported, so that gunicorn's own
arguments never reach oslo.config.
"""

import importlib
import sys

from gunicorn.app import base


class _App(base.BaseApplication):

    def __init__(self, target, options):
        self.target = target
        self.options = options
        super().__init__()

    def load_config(self):
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        module, _, attr = self.target.partition(':')
        return getattr(importlib.import_module(module), attr)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    name, bind, target = sys.argv[1:4]
    sys.argv = [name] + sys.argv[4:]
    # One process, a few threads: the box serves one user at a time, and
    # each worker costs the memory of a whole service.
    _App(target, {'bind': bind, 'workers': 1, 'threads': 4,
                  'worker_class': 'gthread', 'timeout': 600,
                  'graceful_timeout': 5, 'proc_name': name}).run()


if __name__ == '__main__':
    main()
