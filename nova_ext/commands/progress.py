# SPDX-License-Identifier: Apache-2.0
"""The one progress display of ``migrate --wait``, ``volume-move --wait``
and ``evacuate``.

On a terminal it is a bar drawn by rich (the phase, the bar, what is done
of the total: bytes, or VMs for an evacuation); elsewhere (a log, a pipe,
CI) one plain line per change, so that a file holds no control characters;
with ``--json`` one JSON object per line, the status the agent answered.
"""

import json

from rich import console as rich_console
from rich import progress as rich_progress

from nova_ext import units

BYTES = 'bytes'


def describe(done, total, unit=BYTES):
    """``1.5 GiB of 4.0 GiB (37.5%)`` or ``3 of 8 VMs (37.5%)``."""
    if unit == BYTES:
        text = '%s of %s' % (units.format_size(done or 0),
                             units.format_size(total or 0))
    else:
        text = '%d of %d %s' % (done or 0, total or 0, unit)
    if total:
        text += ' (%.1f%%)' % (100.0 * min(1.0, float(done or 0) / total))
    return text


def format_line(phase, done, total, detail='', unit=BYTES):
    """The plain line: ``phase, DONE of TOTAL (P%), detail``."""
    parts = [phase]
    if total:
        parts.append(describe(done, total, unit))
    if detail:
        parts.append(detail)
    return ', '.join(parts)


class Progress(object):
    """Shows each update of a long operation on ``stream``.

    ``unit`` is ``bytes`` (sizes shown humanised) or the name of what is
    counted (``VMs``).
    """

    def __init__(self, stream, as_json=False, unit=BYTES, tty=None):
        self.stream = stream
        self.as_json = as_json
        self.unit = unit
        if tty is None:
            tty = stream.isatty()
        self.tty = tty and not as_json
        self._last = None
        self._bar = None
        self._task = None

    def update(self, phase, done, total, detail='', record=None):
        """Show one update.

        ``phase``, ``done`` of ``total`` and ``detail`` (the rest worth
        saying: round, ETA, failures); ``record`` (a dict) is what
        ``--json`` prints.
        """
        line = format_line(phase, done, total, detail, self.unit)
        if self.as_json:
            self.stream.write(json.dumps(record, sort_keys=True) + '\n')
            self.stream.flush()
        elif self.tty:
            self._draw(phase, done, total, detail)
        elif line != self._last:
            self.stream.write(line + '\n')
            self.stream.flush()
        self._last = line

    def _draw(self, phase, done, total, detail):
        if self._bar is None:
            counter = (rich_progress.DownloadColumn(binary_units=True)
                       if self.unit == BYTES else
                       rich_progress.MofNCompleteColumn())
            self._bar = rich_progress.Progress(
                rich_progress.TextColumn('{task.description}'),
                rich_progress.BarColumn(),
                counter,
                rich_progress.TextColumn('{task.fields[detail]}'),
                console=rich_console.Console(file=self.stream,
                                             force_terminal=True),
                transient=False)
            self._task = self._bar.add_task(phase, total=total or None,
                                            completed=done or 0,
                                            detail=detail)
            self._bar.start()
        self._bar.update(self._task, description=phase,
                         completed=done or 0, total=total or None,
                         detail=detail)

    def close(self):
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
