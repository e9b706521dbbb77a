/* SPDX-License-Identifier: Apache-2.0 */
/* Logging to stderr or syslog.
 *
 * When stderr is the journal (systemd's StandardError=journal, the
 * default), each line starts with the sd-daemon priority prefix "<N>" so
 * that `journalctl -p err` finds the errors, and carries no timestamp or
 * "fcache-agent[pid]": journald records both itself.  On a terminal, a pipe
 * or a file, lines keep the timestamped format.
 *
 * The three settings below are the only process-wide mutable state of the
 * agent.  They describe process-wide resources (the one stderr, the one
 * syslog connection), so passing them around would buy nothing.  They are
 * written only by fc_log_setup(), which main() calls once before starting
 * any thread; every other function only reads them, so no lock is needed
 * (thread creation orders the write before every reader).
 */
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LOG_IDENT "fcache-agent"

/* Longest line written to stderr, prefix included.  Longer messages are cut
 * and marked, rather than split: a split line would look like two records. */
#define LOG_LINE_MAX 4096

static enum fc_log_target log_target = FC_LOG_STDERR;
static enum fc_log_level log_threshold = FC_LOG_INFO;
static bool log_journal;

static const char *const level_names[] = {
  [FC_LOG_ERROR] = "error",
  [FC_LOG_WARNING] = "warning",
  [FC_LOG_INFO] = "info",
  [FC_LOG_DEBUG] = "debug",
};

static const char *const level_tags[] = {
  [FC_LOG_ERROR] = "ERROR",
  [FC_LOG_WARNING] = "WARNING",
  [FC_LOG_INFO] = "INFO",
  [FC_LOG_DEBUG] = "DEBUG",
};

static const int level_priorities[] = {
  [FC_LOG_ERROR] = LOG_ERR,
  [FC_LOG_WARNING] = LOG_WARNING,
  [FC_LOG_INFO] = LOG_INFO,
  [FC_LOG_DEBUG] = LOG_DEBUG,
};

#define N_LEVELS (sizeof level_names / sizeof level_names[0])

void fc_log_setup(enum fc_log_target target, enum fc_log_level threshold)
{
  if (log_target == FC_LOG_SYSLOG && target != FC_LOG_SYSLOG)
    closelog();
  log_target = target;
  log_threshold = threshold;
  log_journal = target == FC_LOG_STDERR &&
                fc_log_stream_is_journal(getenv("JOURNAL_STREAM"), STDERR_FILENO);
  /* LOG_NDELAY connects now, so the first message logged from a thread
   * does not race with a lazy connect inside syslog(). */
  if (target == FC_LOG_SYSLOG)
    openlog(LOG_IDENT, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* systemd sets JOURNAL_STREAM to "<device>:<inode>" of the stream it
 * connected stdout/stderr to (both decimal).  A process must compare it with
 * its own stderr: an inherited variable, or stderr redirected by a wrapper
 * script, would otherwise put "<3>" into a file or a terminal. */
bool fc_log_stream_is_journal(const char *journal_stream, int fd)
{
  uintmax_t dev, ino;
  struct stat st;
  char *end;

  if (!journal_stream || !*journal_stream)
    return false;
  errno = 0;
  dev = strtoumax(journal_stream, &end, 10);
  if (errno || end == journal_stream || *end != ':')
    return false;
  journal_stream = end + 1;
  ino = strtoumax(journal_stream, &end, 10);
  if (errno || end == journal_stream || *end != '\0')
    return false;
  if (fstat(fd, &st) < 0)
    return false;
  return (uintmax_t)st.st_dev == dev && (uintmax_t)st.st_ino == ino;
}

int fc_log_priority(enum fc_log_level level)
{
  if ((unsigned)level >= N_LEVELS)
    level = FC_LOG_ERROR;
  return level_priorities[level];
}

bool fc_log_enabled(enum fc_log_level level)
{
  return level <= log_threshold;
}

/* Writes the whole buffer, retrying short writes; stderr is a pipe to
 * journald or a terminal, either of which may accept partial writes. */
static void write_all(int fd, const char *buf, size_t len)
{
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return;                   /* nowhere left to report this */
    }
    buf += n;
    len -= (size_t)n;
  }
}

static size_t format_timestamp(char *buf, size_t size)
{
  struct timespec ts;
  struct tm tm;
  size_t n;

  if (clock_gettime(CLOCK_REALTIME, &ts) < 0 ||
      localtime_r(&ts.tv_sec, &tm) == NULL)
    return 0;
  n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
  if (n == 0)
    return 0;
  int m = snprintf(buf + n, size - n, ".%03ld ", ts.tv_nsec / 1000000L);
  if (m < 0 || (size_t)m >= size - n)
    return 0;
  return n + (size_t)m;
}

static void log_stderr(enum fc_log_level level, const char *fmt, va_list ap)
{
  static const char trunc_mark[] = "...[truncated]";
  char line[LOG_LINE_MAX];
  size_t len;
  int n;

  if (log_journal) {
    n = snprintf(line, sizeof line, "<%d>%s: ", level_priorities[level],
                 level_tags[level]);
    len = 0;
  } else {
    len = format_timestamp(line, sizeof line);
    n = snprintf(line + len, sizeof line - len, "%s[%ld]: %s: ",
                 LOG_IDENT, (long)getpid(), level_tags[level]);
  }
  if (n < 0)
    return;
  len += (size_t)n;

  /* Leave room for the newline. */
  n = vsnprintf(line + len, sizeof line - len - 1, fmt, ap);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof line - len - 1) {
    len = sizeof line - 1 - (sizeof trunc_mark - 1);
    memcpy(line + len, trunc_mark, sizeof trunc_mark - 1);
    len += sizeof trunc_mark - 1;
  } else {
    len += (size_t)n;
  }
  /* Callers sometimes end messages with a newline; don't double it. */
  while (len > 0 && line[len - 1] == '\n')
    len--;
  line[len++] = '\n';

  /* One write() per record: concurrent records from several threads stay
   * whole lines instead of interleaving byte runs. */
  write_all(STDERR_FILENO, line, len);
}

void fc_log(enum fc_log_level level, const char *fmt, ...)
{
  /* Callers often log and then return -errno; logging must not clobber it. */
  int saved_errno = errno;
  va_list ap;

  if ((unsigned)level >= N_LEVELS)
    level = FC_LOG_ERROR;
  if (!fc_log_enabled(level))
    goto out;

  va_start(ap, fmt);
  if (log_target == FC_LOG_SYSLOG)
    vsyslog(level_priorities[level], fmt, ap);
  else
    log_stderr(level, fmt, ap);
  va_end(ap);
out:
  errno = saved_errno;
}

int fc_log_level_parse(const char *s, enum fc_log_level *out)
{
  for (size_t i = 0; i < N_LEVELS; i++) {
    if (strcasecmp(s, level_names[i]) == 0) {
      *out = (enum fc_log_level)i;
      return 0;
    }
  }
  /* "warn" is what people type; accept it rather than fail a start-up. */
  if (strcasecmp(s, "warn") == 0) {
    *out = FC_LOG_WARNING;
    return 0;
  }
  return -EINVAL;
}

int fc_log_target_parse(const char *s, enum fc_log_target *out)
{
  if (strcasecmp(s, "stderr") == 0) {
    *out = FC_LOG_STDERR;
    return 0;
  }
  if (strcasecmp(s, "syslog") == 0) {
    *out = FC_LOG_SYSLOG;
    return 0;
  }
  return -EINVAL;
}

const char *fc_log_level_name(enum fc_log_level level)
{
  if ((unsigned)level >= N_LEVELS)
    return "unknown";
  return level_names[level];
}

const char *fc_log_target_name(enum fc_log_target target)
{
  return target == FC_LOG_SYSLOG ? "syslog" : "stderr";
}
