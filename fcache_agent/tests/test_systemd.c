/* SPDX-License-Identifier: Apache-2.0 */
/* The agent under systemd: common/log.c's sd-daemon "<N>" priority prefix
 * when stderr is the journal (JOURNAL_STREAM names stderr's device:inode)
 * and the timestamped format otherwise; common/sd_notify.c's datagrams
 * (READY=1, WATCHDOG=1) and the watchdog interval. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/sd_notify.h"

/* "<dev>:<ino>" of fd, as systemd writes JOURNAL_STREAM. */
static void stream_id(int fd, char *buf, size_t size)
{
  struct stat st;

  assert_int_equal(fstat(fd, &st), 0);
  snprintf(buf, size, "%ju:%ju", (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
}

static void test_journal_stream_matches_only_its_file(void **state)
{
  char path[] = "/tmp/fcache-test-log-XXXXXX";
  char id[64], other[64];
  int fd = mkstemp(path), fd2;

  assert_true(fd >= 0);
  unlink(path);
  fd2 = open("/dev/null", O_WRONLY);
  assert_true(fd2 >= 0);
  stream_id(fd, id, sizeof id);
  stream_id(fd2, other, sizeof other);

  assert_true(fc_log_stream_is_journal(id, fd));
  /* Inherited from a parent whose stderr was the journal, but ours is
   * another file: no prefix. */
  assert_false(fc_log_stream_is_journal(other, fd));
  assert_false(fc_log_stream_is_journal(NULL, fd));
  assert_false(fc_log_stream_is_journal("", fd));
  /* Malformed values are no match, not a crash. */
  assert_false(fc_log_stream_is_journal("12", fd));
  assert_false(fc_log_stream_is_journal("12:", fd));
  assert_false(fc_log_stream_is_journal(":34", fd));
  assert_false(fc_log_stream_is_journal("x:y", fd));
  char trailing[80];
  snprintf(trailing, sizeof trailing, "%s ", id);
  assert_false(fc_log_stream_is_journal(trailing, fd));
  /* A closed descriptor cannot be the journal. */
  assert_false(fc_log_stream_is_journal(id, 9999));
  close(fd2);
  close(fd);
}

static void test_priorities(void **state)
{
  assert_int_equal(fc_log_priority(FC_LOG_ERROR), LOG_ERR);
  assert_int_equal(fc_log_priority(FC_LOG_WARNING), LOG_WARNING);
  assert_int_equal(fc_log_priority(FC_LOG_INFO), LOG_INFO);
  assert_int_equal(fc_log_priority(FC_LOG_DEBUG), LOG_DEBUG);
}

/* Logs three lines with stderr on a scratch file, JOURNAL_STREAM set to
 * journal_stream (NULL: to the file's own id), and returns what was
 * written. */
static char *log_through_stderr(bool same_file, char *buf, size_t size)
{
  char path[] = "/tmp/fcache-test-log-XXXXXX";
  char id[64];
  int fd = mkstemp(path), saved = dup(STDERR_FILENO);
  ssize_t n;

  assert_true(fd >= 0 && saved >= 0);
  unlink(path);
  assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
  if (same_file)
    stream_id(STDERR_FILENO, id, sizeof id);
  else
    snprintf(id, sizeof id, "1:1");
  assert_int_equal(setenv("JOURNAL_STREAM", id, 1), 0);
  fc_log_setup(FC_LOG_STDERR, FC_LOG_DEBUG);
  log_error("volume vol-1: cannot read the origin: %s", strerror(EIO));
  log_warning("volume vol-2: slow");
  log_debug("volume vol-3: detail");
  assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
  close(saved);
  unsetenv("JOURNAL_STREAM");
  fc_log_setup(FC_LOG_STDERR, FC_LOG_INFO);

  n = pread(fd, buf, size - 1, 0);
  assert_true(n > 0);
  buf[n] = '\0';
  close(fd);
  return buf;
}

static void test_journal_lines_carry_priority_prefix(void **state)
{
  char buf[4096];
  char *out = log_through_stderr(true, buf, sizeof buf);

  assert_string_equal(out,
                      "<3>ERROR: volume vol-1: cannot read the origin: Input/output error\n"
                      "<4>WARNING: volume vol-2: slow\n"
                      "<7>DEBUG: volume vol-3: detail\n");
}

static void test_other_stderr_keeps_timestamps(void **state)
{
  char buf[4096], tag[64];
  char *out = log_through_stderr(false, buf, sizeof buf);
  int year;

  /* "2026-11-28 20:00:00.123 fcache-agent[42]: ERROR: ..." */
  assert_int_equal(sscanf(out, "%d-", &year), 1);
  assert_true(year >= 2000);
  assert_null(strchr(out, '<'));
  snprintf(tag, sizeof tag, "fcache-agent[%ld]: ERROR: volume vol-1:", (long)getpid());
  assert_non_null(strstr(out, tag));
  assert_non_null(strstr(out, "WARNING: volume vol-2: slow\n"));
}

/* A datagram socket bound where NOTIFY_SOCKET points, as systemd's. */
static int bind_notify(const char *path)
{
  struct sockaddr_un a = { .sun_family = AF_UNIX };
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  assert_true(fd >= 0);
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  if (path[0] == '@')
    a.sun_path[0] = '\0';
  assert_int_equal(bind(fd, (struct sockaddr *)&a,
                        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) +
                                    (path[0] == '/'))), 0);
  return fd;
}

static void recv_msg(int fd, const char *want)
{
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);

  assert_true(n > 0);
  buf[n] = '\0';
  assert_string_equal(buf, want);
}

static void test_notify_path_and_abstract(void **state)
{
  char dir[] = "/tmp/fcache-test-notify-XXXXXX", path[128], abstract[64];
  struct fc_notify n;
  int fd;

  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/notify", dir);
  fd = bind_notify(path);
  assert_int_equal(fc_notify_open(&n, path, "4000000", NULL, getpid()), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 2000000);
  assert_int_equal(fc_notify_send(&n, "READY=1"), 0);
  recv_msg(fd, "READY=1");
  assert_int_equal(fc_notify_send(&n, "WATCHDOG=1"), 0);
  recv_msg(fd, "WATCHDOG=1");
  fc_notify_close(&n);
  close(fd);
  unlink(path);
  rmdir(dir);

  snprintf(abstract, sizeof abstract, "@fcache-test-notify-%ld", (long)getpid());
  fd = bind_notify(abstract);
  assert_int_equal(fc_notify_open(&n, abstract, NULL, NULL, getpid()), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 0);
  assert_int_equal(fc_notify_send(&n, "READY=1"), 0);
  recv_msg(fd, "READY=1");
  fc_notify_close(&n);
  close(fd);
}

static void test_notify_unset_and_refused(void **state)
{
  struct fc_notify n;
  char pid[32];

  /* No NOTIFY_SOCKET: nothing to do, and sending succeeds silently. */
  assert_int_equal(fc_notify_open(&n, NULL, "1000000", NULL, getpid()), 0);
  assert_int_equal(fc_notify_send(&n, "READY=1"), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 0);
  /* The watchdog belongs to another process: not ours to feed. */
  snprintf(pid, sizeof pid, "%ld", (long)getpid() + 1);
  assert_int_equal(fc_notify_open(&n, "@x", "1000000", pid, getpid()), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 0);
  fc_notify_close(&n);
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  assert_int_equal(fc_notify_open(&n, "@x", "1000000", pid, getpid()), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 500000);
  fc_notify_close(&n);
  /* The shortest watchdog still gets pings. */
  assert_int_equal(fc_notify_open(&n, "@x", "1", NULL, getpid()), 0);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 1);
  fc_notify_close(&n);
  /* Values systemd never writes. */
  assert_int_equal(fc_notify_open(&n, "relative/path", NULL, NULL, getpid()), -EINVAL);
  assert_int_equal(fc_notify_open(&n, "@x", "-5", NULL, getpid()), -EINVAL);
  assert_int_equal(fc_notify_open(&n, "@x", "5s", NULL, getpid()), -EINVAL);
  assert_int_equal(fc_notify_watchdog_interval_usec(&n), 0);
  /* Nobody listening: the error is the caller's to log. */
  assert_int_equal(fc_notify_open(&n, "/nonexistent/notify", NULL, NULL, getpid()), 0);
  assert_int_equal(fc_notify_send(&n, "READY=1"), -ENOENT);
  fc_notify_close(&n);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_journal_stream_matches_only_its_file),
    cmocka_unit_test(test_priorities),
    cmocka_unit_test(test_journal_lines_carry_priority_prefix),
    cmocka_unit_test(test_other_stderr_keeps_timestamps),
    cmocka_unit_test(test_notify_path_and_abstract),
    cmocka_unit_test(test_notify_unset_and_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
