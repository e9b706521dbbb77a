/* SPDX-License-Identifier: Apache-2.0 */
/* origin_prefixes (origin/origin_policy.c): one test per rule, each
 * checking the errno, that the message names what to change, and that a
 * refused origin was not opened.  Block-device rules (O_EXCL on a mounted
 * device, the cache's disk) need root and loop devices: they are in
 * tests/functional/test_least_privilege.py. */
#include "testutil.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "origin/origin_policy.h"

struct env {
  char dir[80], vols[96], state[112], cache[128];
  char prefixes[2][FC_PATH_MAX];
  struct fc_origin_policy pol;
};

static void make_file(const char *path)
{
  int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0600);

  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 1 << 20), 0);
  close(fd);
}

static int setup(void **state)
{
  struct env *e = calloc(1, sizeof *e);

  tu_mkdtemp(e->dir, sizeof e->dir);
  snprintf(e->vols, sizeof e->vols, "%s/vols", e->dir);
  snprintf(e->state, sizeof e->state, "%s/vols/state", e->dir);
  snprintf(e->cache, sizeof e->cache, "%s/cache.img", e->state);
  assert_int_equal(mkdir(e->vols, 0700), 0);
  assert_int_equal(mkdir(e->state, 0700), 0);
  make_file(e->cache);
  snprintf(e->prefixes[0], FC_PATH_MAX, "%s/", e->vols);
  snprintf(e->prefixes[1], FC_PATH_MAX, "/dev/");
  e->pol = (struct fc_origin_policy){ .prefixes = e->prefixes,
                                      .n_prefixes = 2,
                                      .state_dir = e->state,
                                      .cache_path = e->cache,
                                      .block_devices_anywhere = true };
  *state = e;
  return 0;
}

static int teardown(void **state)
{
  struct env *e = *state;
  char cmd[300];

  snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->dir);
  assert_int_equal(system(cmd), 0);
  free(e);
  return 0;
}

/* Opens `path`; returns the result, closes a descriptor it got. */
static int try_open(struct env *e, const char *path, char *err, size_t len)
{
  int fd = -1, r;

  err[0] = '\0';
  r = fc_origin_policy_open(&e->pol, path, O_RDWR, &fd, err, len);
  if (r == 0) {
    assert_true(fd >= 0);
    close(fd);
  } else {
    assert_int_equal(fd, -1);
  }
  return r;
}

static void expect_refused(struct env *e, const char *path, int err,
                           const char *what)
{
  char msg[1024];
  int r = try_open(e, path, msg, sizeof msg);

  if (r != -err || !strstr(msg, what))
    fail_msg("%s: got %d '%s', want %d '...%s...'", path, r, msg, -err, what);
}

static void expect_ok(struct env *e, const char *path)
{
  char msg[1024];
  int r = try_open(e, path, msg, sizeof msg);

  if (r != 0)
    fail_msg("%s: refused (%d): %s", path, r, msg);
}

static void test_names(void **state)
{
  struct env *e = *state;
  char p[512];

  snprintf(p, sizeof p, "%s/v1", e->vols);
  make_file(p);
  expect_ok(e, p);
  expect_refused(e, "vols/v1", EINVAL, "not an absolute path");
  snprintf(p, sizeof p, "%s/../vols/v1", e->vols);
  expect_refused(e, p, EINVAL, "'.' or '..' components");
  snprintf(p, sizeof p, "%s/./v1", e->vols);
  expect_refused(e, p, EINVAL, "'.' or '..' components");
  expect_refused(e, "/etc/passwd", EPERM, "which is a regular file outside "
                 "the agent's origin_prefixes; an origin is a block device "
                 "(any name), or a file under origin_prefixes: add its "
                 "directory to origin_prefixes");
  /* A device node outside /dev is no block device "as os-brick names
   * it": made by root anywhere, it could stand for any disk. */
  snprintf(p, sizeof p, "%s/sdz", e->dir);
  assert_int_equal(mknod(p, S_IFBLK | 0600, makedev(7, 250)), 0);
  expect_refused(e, p, EPERM, "which is a block device node not in /dev "
                 "outside the agent's origin_prefixes");
  e->pol.block_devices_anywhere = false;
  expect_refused(e, p, EPERM, "not under any of the agent's origin_prefixes "
                 "(and origin_block_devices = prefixes)");
  e->pol.block_devices_anywhere = true;
  e->pol.n_prefixes = 0;
  snprintf(p, sizeof p, "%s/v1", e->vols);
  expect_refused(e, p, EPERM, "origin_prefixes (empty)");
}

/* A prefix without a trailing '/' is a name prefix, resolved through its
 * directory. */
static void test_name_prefix(void **state)
{
  struct env *e = *state;
  char p[512];

  snprintf(e->prefixes[0], FC_PATH_MAX, "%s/vol-", e->vols);
  snprintf(p, sizeof p, "%s/vol-1", e->vols);
  make_file(p);
  expect_ok(e, p);
  snprintf(p, sizeof p, "%s/other", e->vols);
  make_file(p);
  expect_refused(e, p, EPERM, "a regular file outside");
}

static void test_links(void **state)
{
  struct env *e = *state;
  char p[512], q[512];

  snprintf(p, sizeof p, "%s/v1", e->vols);
  make_file(p);
  snprintf(q, sizeof q, "%s/inside", e->vols);
  assert_int_equal(symlink(p, q), 0);
  expect_ok(e, q);
  snprintf(q, sizeof q, "%s/escape", e->vols);
  assert_int_equal(symlink("/etc/passwd", q), 0);
  expect_refused(e, q, EPERM, "resolves to /etc/passwd, outside");
  snprintf(q, sizeof q, "%s/escape-dir", e->vols);
  assert_int_equal(symlink("/etc", q), 0);
  snprintf(q, sizeof q, "%s/escape-dir/passwd", e->vols);
  expect_refused(e, q, EPERM, "outside");
  snprintf(q, sizeof q, "%s/hard", e->vols);
  assert_int_equal(link(p, q), 0);
  expect_refused(e, q, EPERM, "2 hard links");
  expect_refused(e, p, EPERM, "2 hard links");
}

static void test_kinds(void **state)
{
  struct env *e = *state;
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char p[512];
  int s;

  snprintf(p, sizeof p, "%s/dir", e->vols);
  assert_int_equal(mkdir(p, 0700), 0);
  expect_refused(e, p, EPERM, "which is a directory; an origin is a block "
                 "device or a regular file");
  snprintf(p, sizeof p, "%s/fifo", e->vols);
  assert_int_equal(mkfifo(p, 0600), 0);
  expect_refused(e, p, EPERM, "a FIFO");          /* and did not block */
  snprintf(p, sizeof p, "%s/null", e->vols);
  assert_int_equal(symlink("/dev/null", p), 0);
  expect_refused(e, p, EPERM, "a character device");
  expect_refused(e, "/dev/null", EPERM, "a character device");
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", e->vols);
  s = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
  expect_refused(e, sa.sun_path, EPERM, "a socket");
  close(s);
  /* A regular file under a /dev/ prefix: block devices only there. */
  if (access("/dev/shm", W_OK) == 0) {
    snprintf(p, sizeof p, "/dev/shm/fcache-test-%ld", (long)getpid());
    make_file(p);
    expect_refused(e, p, EPERM, "admits block devices only");
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/missing", e->vols);
  expect_refused(e, p, ENOENT, "cannot open origin");
}

static void test_agent_files(void **state)
{
  struct env *e = *state;
  char p[512];

  expect_refused(e, e->cache, EPERM, "inside the agent's state_dir");
  snprintf(p, sizeof p, "%s/volumes.json", e->state);
  make_file(p);
  expect_refused(e, p, EPERM, "state_dir");
  snprintf(p, sizeof p, "%s/to-state", e->vols);
  assert_int_equal(symlink(e->state, p), 0);
  snprintf(p, sizeof p, "%s/to-state/volumes.json", e->vols);
  expect_refused(e, p, EPERM, "state_dir");
  /* The cache outside state_dir: refused by identity, also via a link. */
  snprintf(p, sizeof p, "%s/cache2.img", e->vols);
  make_file(p);
  e->pol.cache_path = p;
  expect_refused(e, p, EPERM, "the agent's cache");
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_names, setup, teardown),
    cmocka_unit_test_setup_teardown(test_name_prefix, setup, teardown),
    cmocka_unit_test_setup_teardown(test_links, setup, teardown),
    cmocka_unit_test_setup_teardown(test_kinds, setup, teardown),
    cmocka_unit_test_setup_teardown(test_agent_files, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
