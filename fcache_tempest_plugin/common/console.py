# SPDX-License-Identifier: Apache-2.0
"""What fcache-guest reports on its serial console.

fcache-guest (tools/cloudbox/guest_init.sh) writes random data onto the
volume it boots from, then reads them back past its page cache every few
seconds, printing one line per step::

    fcache-guest: wrote MIB md5 SUM
    fcache-guest: read SEQ md5 SUM ms MILLISECONDS

Nova keeps the console (``os-getConsoleOutput``) across a live migration:
the lines printed on the destination follow those of the source.
"""

import re
import time

_WROTE = re.compile(r'^fcache-guest: wrote (\d+) md5 ([0-9a-f]{32})\s*$')
_READ = re.compile(r'^fcache-guest: read (\d+) md5 ([0-9a-f]{32}) '
                   r'ms (\d+)\s*$')
_FAILED = re.compile(r'^fcache-guest: (write failed|no disk .*)$')


class GuestReportError(Exception):
    """The guest said something went wrong, or said nothing in time."""


class Report(object):
    def __init__(self, output):
        self.written = None
        self.written_mib = None
        self.reads = []
        for line in (output or '').splitlines():
            line = line.strip('\r')
            failed = _FAILED.match(line)
            if failed:
                raise GuestReportError('the guest reports: %s'
                                       % failed.group(1))
            m = _WROTE.match(line)
            if m:
                self.written_mib = int(m.group(1))
                self.written = m.group(2)
                continue
            m = _READ.match(line)
            if m:
                self.reads.append((int(m.group(1)), m.group(2),
                                   int(m.group(3))))

    @property
    def last_seq(self):
        return self.reads[-1][0] if self.reads else 0


class Console(object):
    """Polls a server's console output through Nova's API."""

    def __init__(self, servers_client, server_id, timeout, interval):
        self.client = servers_client
        self.server_id = server_id
        self.timeout = timeout
        self.interval = interval

    def report(self):
        out = self.client.get_console_output(self.server_id)['output']
        return Report(out)

    def wait(self, predicate, what):
        deadline = time.time() + self.timeout
        report = None
        while time.time() < deadline:
            report = self.report()
            if predicate(report):
                return report
            time.sleep(self.interval)
        raise GuestReportError(
            'no %s on the console of %s within %d s (last report: wrote %s, '
            '%d reads)' % (what, self.server_id, self.timeout,
                           report.written if report else None,
                           len(report.reads) if report else 0))

    def wait_written(self):
        """The md5 the guest wrote, once it has read it back once."""
        report = self.wait(lambda r: r.written and r.reads,
                           'data written and read back')
        return report.written, report

    def reads_after(self, seq, count=2):
        """At least ``count`` reads numbered after ``seq``."""
        report = self.wait(lambda r: sum(1 for s, _, _ in r.reads
                                         if s > seq) >= count,
                           '%d reads after read %d' % (count, seq))
        return [r for r in report.reads if r[0] > seq]
