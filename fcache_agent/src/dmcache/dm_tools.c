/* SPDX-License-Identifier: Apache-2.0 */
/* Running thin-provisioning-tools; see dm_tools.h. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dm_tools.h"
#include "common/log.h"

extern char **environ;

/* The last non-empty line of a small text file, for the error message. */
static void
last_line(const char *path, char *buf, size_t len)
{
  char text[2048];
  FILE *f = fopen(path, "re");
  size_t n = 0;

  buf[0] = '\0';
  if (!f)
    return;
  if (fseek(f, -(long)(sizeof text - 1), SEEK_END))
    rewind(f);
  n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
    n--;
  text[n] = '\0';
  const char *p = strrchr(text, '\n');
  size_t l;

  p = p ? p + 1 : text;
  l = strlen(p) < len ? strlen(p) : len - 1;
  memcpy(buf, p, l);
  buf[l] = '\0';
}

/* Run argv with stdout and stderr to files next to out (out.err): the
 * agent is multi-threaded, so posix_spawn rather than fork. */
static int
run(char *const argv[], const char *out, char *err, size_t errlen)
{
  char errpath[4200], msg[512];
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int st, r;

  snprintf(errpath, sizeof errpath, "%s.err", out);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, strcmp(argv[0], "cache_restore") ? "/dev/null"
                                   : errpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  log_debug("running %s", argv[0]);
  r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (r) {
    snprintf(err, errlen, "cannot run %s (thin-provisioning-tools): %s", argv[0],
             strerror(r));
    return -r;
  }
  while (waitpid(pid, &st, 0) == -1)
    if (errno != EINTR) {
      r = -errno;
      snprintf(err, errlen, "waiting for %s: %s", argv[0], strerror(-r));
      return r;
    }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    unlink(errpath);
    return 0;
  }
  last_line(errpath, msg, sizeof msg);
  snprintf(err, errlen, "%s failed (%s %d): %s", argv[0],
           WIFEXITED(st) ? "exit status" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), msg[0] ? msg : "no message");
  return -EIO;
}

int
fc_dmc_dump_run(const char *meta_dev, const char *xml, char *err, size_t errlen)
{
  char *argv[] = { "cache_dump", (char *)meta_dev, "-o", (char *)xml, NULL };

  return run(argv, xml, err, errlen);
}

int
fc_dmc_restore_run(const char *xml, const char *meta_dev, char *err, size_t errlen)
{
  char *argv[] = { "cache_restore", "-q", "-i", (char *)xml, "-o", (char *)meta_dev,
                   "--metadata-version", "1", NULL };

  return run(argv, xml, err, errlen);
}

int
fc_era_invalidate_run(const char *meta_dev, uint32_t since, const char *xml,
                      char *err, size_t errlen)
{
  char era[16];
  char *argv[] = { "era_invalidate", "--written-since", era, "-o", (char *)xml,
                   (char *)meta_dev, NULL };

  snprintf(era, sizeof era, "%u", since);
  return run(argv, xml, err, errlen);
}
