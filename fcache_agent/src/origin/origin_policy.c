/* SPDX-License-Identifier: Apache-2.0 */
/* Which local paths the agent may open as an origin; see origin_policy.h.
 *
 * Why: the agent runs as root and whoever may attach a volume (a member of
 * control_admin_group, or a compromised client of it) would otherwise read
 * and write any file or device on the host through the export.  The
 * origins os-brick hands over live in a few well-known places; anything
 * else is refused before it is opened, with a message naming the key an
 * operator would change.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "origin_policy.h"

#define KEY "origin_prefixes"

void fc_origin_policy_init(struct fc_origin_policy *pol,
                           const struct fc_config *cfg)
{
  pol->prefixes = cfg->origin_prefixes;
  pol->n_prefixes = cfg->n_origin_prefixes;
  pol->state_dir = cfg->state_dir;
  pol->cache_path = cfg->cache_path;
  pol->block_devices_anywhere = strcmp(cfg->origin_block_devices, "prefixes") != 0;
  pol->tls_dir = cfg->origin_tls_dir[0] ? cfg->origin_tls_dir : NULL;
  pol->tls_psk_file = cfg->origin_tls_psk_file[0] ? cfg->origin_tls_psk_file : NULL;
  pol->rbd_dirs = cfg->origin_rbd_dirs;
  pol->n_rbd_dirs = cfg->n_origin_rbd_dirs;
  pol->rbd_ms_mode = cfg->origin_rbd_ms_mode;
  pol->stall_ms = cfg->origin_stall_timeout_s * 1000;
  pol->volume_id = NULL;
}

static bool under_dev(const char *prefix)
{
  return strncmp(prefix, "/dev/", 5) == 0;
}

/* `path` is `dir` or below it (dir without a trailing '/'). */
static bool path_under(const char *path, const char *dir)
{
  size_t n = strlen(dir);

  if (n == 1 && dir[0] == '/')
    return true;
  return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The prefix with its directory part resolved: "/a/b/" -> realpath("/a/b")
 * + "/"; "/a/b" (a name prefix) -> realpath("/a") + "/b".  A string prefix
 * of what a resolved origin must start with. */
static int resolve_prefix(const char *prefix, char *out, size_t outlen)
{
  char dir[FC_PATH_MAX], real[PATH_MAX];
  const char *slash = strrchr(prefix, '/');
  size_t dlen = (size_t)(slash - prefix);

  memcpy(dir, prefix, dlen);
  dir[dlen] = '\0';
  if (!realpath(dlen ? dir : "/", real))
    return -errno;
  if (snprintf(out, outlen, "%s/%s", strcmp(real, "/") ? real : "",
               slash + 1) >= (int)outlen)
    return -ENAMETOOLONG;
  return 0;
}

/* What `path` resolved to (`real`) stays inside the prefix it matched,
 * resolved too: a link in /var/lib/nova/mnt must not lead to /etc. */
static int check_inside_prefix(const char *what, const char *path,
                               const char *real, const char *key,
                               const char *prefix, char *err, size_t errlen)
{
  char rprefix[PATH_MAX];
  int r = resolve_prefix(prefix, rprefix, sizeof rprefix);

  if (r < 0 || strncmp(real, rprefix, strlen(rprefix))) {
    snprintf(err, errlen, "%s %s resolves to %s, outside %s (the %s entry %s "
             "it matched); a link must not lead out of its prefix",
             what, path, real, r < 0 ? "(unresolvable)" : rprefix, key,
             prefix);
    return -EPERM;
  }
  return 0;
}

static const char *kind(mode_t m)
{
  return S_ISCHR(m) ? "a character device" : S_ISSOCK(m) ? "a socket" :
         S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" :
         S_ISLNK(m) ? "a symbolic link" : "neither a block device nor a "
         "regular file";
}

struct ours {
  const struct stat *cache;     /* the cache file's, or NULL */
  const char *state;            /* state_dir resolved, or NULL */
};

/* A loop device's backing file that is the cache file or in state_dir. */
static bool is_ours(const struct stat *st, const char *path, void *ctx)
{
  const struct ours *o = ctx;
  char real[PATH_MAX];

  if (o->cache && st->st_dev == o->cache->st_dev &&
      st->st_ino == o->cache->st_ino)
    return true;
  return o->state && realpath(path, real) && path_under(real, o->state);
}

/* Refuses the cache and what holds it or the state directory.  st is the
 * candidate's (what the O_PATH descriptor refers to), real its path. */
static int check_not_ours(const struct fc_origin_policy *pol, const char *path,
                          const struct stat *st, const char *real,
                          char *err, size_t errlen)
{
  char state[PATH_MAX];
  struct stat cs, ss;

  if (realpath(pol->state_dir, state) && path_under(real, state)) {
    snprintf(err, errlen, "origin %s resolves to %s, inside the agent's "
             "state_dir %s; the agent never serves its own state", path, real,
             state);
    return -EPERM;
  }
  if (stat(pol->cache_path, &cs) == 0) {
    bool same = S_ISBLK(st->st_mode) ?
      (S_ISBLK(cs.st_mode) && fc_blockdev_overlap(st->st_rdev, cs.st_rdev)) ||
      (!S_ISBLK(cs.st_mode) && fc_blockdev_overlap(st->st_rdev, cs.st_dev)) :
      st->st_dev == cs.st_dev && st->st_ino == cs.st_ino;
    if (same) {
      snprintf(err, errlen, "origin %s is, holds or shares a device with "
               "the agent's cache %s (cache_path); refused", path,
               pol->cache_path);
      return -EPERM;
    }
  }
  /* A loop device over the cache file or a file in state_dir serves
   * those bytes as surely as the files themselves. */
  if (S_ISBLK(st->st_mode)) {
    bool cache_file = stat(pol->cache_path, &cs) == 0 && S_ISREG(cs.st_mode);
    struct ours o = { cache_file ? &cs : NULL,
                      realpath(pol->state_dir, state) ? state : NULL };

    if (fc_blockdev_backing_file(st->st_rdev, is_ours, &o)) {
      snprintf(err, errlen, "origin %s is a loop device over the agent's "
               "cache %s or a file in its state_dir %s; refused", path,
               pol->cache_path, pol->state_dir);
      return -EPERM;
    }
  }
  /* A disk (or device-mapper device) under the filesystem of the state
   * directory holds the state and every other file there. */
  if (S_ISBLK(st->st_mode) && stat(pol->state_dir, &ss) == 0 &&
      fc_blockdev_overlap(st->st_rdev, ss.st_dev)) {
    snprintf(err, errlen, "origin %s shares a device with the filesystem of "
             "the agent's state_dir %s; refused", path, pol->state_dir);
    return -EPERM;
  }
  return 0;
}

/* The lexical rules on the path as given; the prefix it matched. */
static int check_name(const struct fc_origin_policy *pol, const char *path,
                      const char **prefix, char *err, size_t errlen)
{
  if (path[0] != '/' || fc_path_has_dot_component(path) ||
      strlen(path) >= FC_PATH_MAX) {
    snprintf(err, errlen, "origin '%.200s' is not an absolute path without "
             "'.' or '..' components, shorter than %d bytes", path,
             FC_PATH_MAX);
    return -EINVAL;
  }
  *prefix = NULL;
  for (unsigned i = 0; i < pol->n_prefixes; i++) {
    if (!strncmp(path, pol->prefixes[i], strlen(pol->prefixes[i]))) {
      *prefix = pol->prefixes[i];
      return 0;
    }
  }
  if (pol->block_devices_anywhere)
    return 0;                   /* a block device is judged by what it is */
  snprintf(err, errlen, "origin %.200s is not under any of the agent's "
           KEY "%s (and origin_block_devices = prefixes); add its directory "
           "to " KEY " in the agent's configuration", path,
           pol->n_prefixes ? "" : " (empty: only NBD origins allowed)");
  return -EPERM;
}

/* The rules on what the path resolved to. */
static int check_target(const struct fc_origin_policy *pol, const char *path,
                        const char *prefix, const struct stat *st,
                        const char *real, char *err, size_t errlen)
{
  int r;

  if (!prefix) {
    /* os-brick names a volume /dev/sdX (iSCSI, FC), /dev/dm-N
     * (multipath), /dev/nvmeXnY (NVMe-oF), /dev/md/... (replicated): any
     * block device node is taken on what it is -- not the cache nor
     * stacked with it, not the state directory's disk, and (opened
     * exclusively) not mounted or held -- while a file names a volume only
     * where Nova keeps volume files. */
    if (!S_ISBLK(st->st_mode) || !path_under(real, "/dev")) {
      snprintf(err, errlen, "origin %s resolves to %s, which is %s outside "
               "the agent's " KEY "%s; an origin is a block device (any "
               "name), or a file under " KEY ": add its directory to " KEY
               " in the agent's configuration", path, real,
               S_ISREG(st->st_mode) ? "a regular file" :
               S_ISBLK(st->st_mode) ? "a block device node not in /dev" :
               kind(st->st_mode),
               pol->n_prefixes ? "" : " (empty)");
      return -EPERM;
    }
    return check_not_ours(pol, path, st, real, err, errlen);
  }
  if (!S_ISBLK(st->st_mode) && !S_ISREG(st->st_mode)) {
    snprintf(err, errlen, "origin %s resolves to %s, which is %s; an origin "
             "is a block device or a regular file", path, real,
             kind(st->st_mode));
    return -EPERM;
  }
  /* A second name for a file elsewhere (a hard link made into a prefix)
   * would pass the path checks below. */
  if (S_ISREG(st->st_mode) && st->st_nlink != 1) {
    snprintf(err, errlen, "origin %s is a regular file with %lu hard links; "
             "an origin file must have exactly one name", path,
             (unsigned long)st->st_nlink);
    return -EPERM;
  }
  if (under_dev(prefix)) {
    /* by-path, by-id, mapper: symlinks to the device node, anywhere in
     * /dev, but only ever to a block device. */
    if (!S_ISBLK(st->st_mode) || !path_under(real, "/dev")) {
      snprintf(err, errlen, "origin %s resolves to %s, which is not a block "
               "device in /dev; a prefix under /dev/ in " KEY " admits block "
               "devices only", path, real);
      return -EPERM;
    }
  } else {
    r = check_inside_prefix("origin", path, real, KEY, prefix, err,
                            errlen);
    if (r < 0)
      return r;
  }
  return check_not_ours(pol, path, st, real, err, errlen);
}

int fc_origin_policy_open(const struct fc_origin_policy *pol,
                          const char *path, int flags, int *fd_out,
                          char *err, size_t errlen)
{
  char link[64], real[PATH_MAX];
  const char *prefix = NULL;
  struct stat st, st2;
  ssize_t n;
  int opath = -1, fd = -1, r;

  r = check_name(pol, path, &prefix, err, errlen);
  if (r < 0)
    return r;
  /* O_PATH opens nothing: no device driver runs (opening some character
   * devices has effects), yet the descriptor pins the inode we check. */
  opath = open(path, O_PATH | O_CLOEXEC);
  if (opath < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot open origin %s: %s", path, strerror(-r));
    return r;
  }
  snprintf(link, sizeof link, "/proc/self/fd/%d", opath);
  n = readlink(link, real, sizeof real - 1);
  if (n < 0 || fstat(opath, &st) < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot resolve origin %s: %s", path, strerror(-r));
    goto out;
  }
  real[n] = '\0';
  r = check_target(pol, path, prefix, &st, real, err, errlen);
  if (r < 0)
    goto out;
  /* Reopening through the descriptor opens the inode that was checked,
   * whatever the path names by now. */
  fd = open(link, (flags & O_ACCMODE) | O_CLOEXEC | O_NOCTTY |
            (S_ISBLK(st.st_mode) ? (flags & O_EXCL) : 0));
  if (fd < 0) {
    r = -errno;
    if (r == -EBUSY)
      snprintf(err, errlen, "origin %s (%s) is in use: mounted, or held by "
               "another device or process; the agent opens a block device "
               "origin exclusively", path, real);
    else
      snprintf(err, errlen, "cannot open origin %s: %s", path, strerror(-r));
    goto out;
  }
  if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev ||
      st2.st_ino != st.st_ino) {
    r = -EAGAIN;
    snprintf(err, errlen, "origin %s changed while it was being opened; "
             "try again", path);
    goto out;
  }
  *fd_out = fd;
  fd = -1;
out:
  if (fd >= 0)
    close(fd);
  close(opath);
  return r;
}

int fc_origin_policy_check_socket(const struct fc_origin_policy *pol,
                                  const char *path, char *err, size_t errlen)
{
  char real[PATH_MAX], state[PATH_MAX];
  const char *prefix = NULL;
  struct stat st;
  int r;

  if (path[0] != '/' || fc_path_has_dot_component(path) ||
      strlen(path) >= FC_PATH_MAX) {
    snprintf(err, errlen, "NBD socket '%.200s' is not an absolute path "
             "without '.' or '..' components", path);
    return -EINVAL;
  }
  for (unsigned i = 0; i < pol->n_prefixes && !prefix; i++)
    if (!under_dev(pol->prefixes[i]) &&
        !strncmp(path, pol->prefixes[i], strlen(pol->prefixes[i])))
      prefix = pol->prefixes[i];
  if (!prefix) {
    snprintf(err, errlen, "NBD socket %.200s is not under any of the agent's "
             KEY " (outside /dev/); an nbd+unix origin's socket must be "
             "where origin files may be: add its directory to " KEY, path);
    return -EPERM;
  }
  if (!realpath(path, real) || stat(real, &st) != 0) {
    r = -errno;
    snprintf(err, errlen, "cannot resolve NBD socket %.200s: %s", path,
             strerror(-r));
    return r;
  }
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(err, errlen, "NBD socket %.200s resolves to %s, which is %s, not "
             "a socket", path, real, S_ISREG(st.st_mode) ? "a regular file" :
             S_ISBLK(st.st_mode) ? "a block device" : kind(st.st_mode));
    return -EPERM;
  }
  r = check_inside_prefix("NBD socket", path, real, KEY, prefix, err,
                          errlen);
  if (r < 0)
    return r;
  if (realpath(pol->state_dir, state) && path_under(real, state)) {
    snprintf(err, errlen, "NBD socket %.200s is inside the agent's state_dir "
             "%s; refused", path, state);
    return -EPERM;
  }
  return 0;
}

int fc_origin_policy_open_rbd_file(const struct fc_origin_policy *pol,
                                   const char *what, const char *path,
                                   int *fd_out, char *err, size_t errlen)
{
  char link[64], real[PATH_MAX], state[PATH_MAX];
  const char *dir = NULL;
  struct stat st;
  ssize_t n;
  int opath, fd, r;

  if (path[0] != '/' || fc_path_has_dot_component(path) ||
      strlen(path) >= FC_PATH_MAX) {
    snprintf(err, errlen, "RBD %s '%.200s' is not an absolute path without "
             "'.' or '..' components", what, path);
    return -EINVAL;
  }
  for (unsigned i = 0; i < pol->n_rbd_dirs && !dir; i++)
    if (!strncmp(path, pol->rbd_dirs[i], strlen(pol->rbd_dirs[i])))
      dir = pol->rbd_dirs[i];
  if (!dir) {
    snprintf(err, errlen, "RBD %s %.200s is not under any of the agent's "
             "origin_rbd_dirs; put it there or add its directory to "
             "origin_rbd_dirs in the agent's configuration", what, path);
    return -EPERM;
  }
  /* As for origins: O_PATH opens nothing (a device's driver does not
   * run) and pins the inode the checks judge. */
  opath = open(path, O_PATH | O_CLOEXEC);
  if (opath < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot open RBD %s %.200s: %s", what, path,
             strerror(-r));
    return r;
  }
  snprintf(link, sizeof link, "/proc/self/fd/%d", opath);
  n = readlink(link, real, sizeof real - 1);
  if (n < 0 || fstat(opath, &st) < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot resolve RBD %s %.200s: %s", what, path,
             strerror(-r));
    goto out;
  }
  real[n] = '\0';
  if (!S_ISREG(st.st_mode)) {
    r = -EPERM;
    snprintf(err, errlen, "RBD %s %.200s resolves to %s, which is %s, not a "
             "regular file", what, path, real, kind(st.st_mode));
    goto out;
  }
  r = check_inside_prefix(what, path, real, "origin_rbd_dirs", dir, err,
                          errlen);
  if (r < 0)
    goto out;
  if (realpath(pol->state_dir, state) && path_under(real, state)) {
    r = -EPERM;
    snprintf(err, errlen, "RBD %s %.200s is inside the agent's state_dir %s; "
             "refused", what, path, state);
    goto out;
  }
  fd = open(link, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    r = -errno;
    snprintf(err, errlen, "cannot open RBD %s %.200s: %s", what, path,
             strerror(-r));
    goto out;
  }
  *fd_out = fd;
out:
  close(opath);
  return r;
}
