/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration file parser: defaults, a file using every key and every
 * syntax feature, and one test per kind of mistake checking both the
 * returned errno and that the message names the file, line and key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"

struct tmpconf {
  char path[64];
  char err[1024];
  struct fc_config cfg;
};

/* Writes `text` to a fresh temporary file and loads it. */
static int load_text(struct tmpconf *t, const char *text)
{
  int fd, r;

  strcpy(t->path, "/tmp/fcache-test-conf-XXXXXX");
  fd = mkstemp(t->path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  fc_config_defaults(&t->cfg);
  r = fc_config_load(t->path, &t->cfg, t->err, sizeof t->err);
  unlink(t->path);
  return r;
}

static void test_defaults(void **state)
{
  struct fc_config c;

  fc_config_defaults(&c);
  assert_string_equal(c.control_socket, "/run/fcache/agent.sock");
  assert_string_equal(c.control_group, "");
  assert_string_equal(c.state_dir, "/var/lib/fcache");
  assert_string_equal(c.engine, "ucache");
  assert_string_equal(c.cache_path, "/var/lib/fcache/cache.img");
  assert_int_equal(c.cache_size, 1ULL << 30);
  assert_int_equal(c.block_size, 4096);
  assert_string_equal(c.migration_listen, "127.0.0.1:7440");
  assert_int_equal(c.migration_tls, FC_TLS_PINNED);
  assert_string_equal(c.migration_tls_dir, "/etc/pki/qemu");
  assert_string_equal(c.export_dir, "/run/fcache/exports");
  assert_int_equal(c.log_level, FC_LOG_INFO);
  assert_int_equal(c.log_target, FC_LOG_STDERR);
  assert_int_equal(c.nbd_threads, 8);
  assert_int_equal(c.origin_connections, 4);
  assert_int_equal(c.writeback_interval_ms, 1000);
  assert_int_equal(c.origin_retry_ms, 5000);
  assert_int_equal(c.dirty_high_percent, 50);
}

static void test_empty_file_gives_defaults(void **state)
{
  struct tmpconf t;
  struct fc_config d;

  assert_int_equal(load_text(&t, ""), 0);
  fc_config_defaults(&d);
  assert_memory_equal(&t.cfg, &d, sizeof d);
}

static void test_good_file(void **state)
{
  struct tmpconf t;
  const char *text =
    "\xEF\xBB\xBF# fcache agent\n"
    "; another comment style\n"
    "\n"
    "[agent]\r\n"
    "  control_socket   =   /run/x/agent.sock   \r\n"
    "control_group=fcache admins=ops\n"
    "state_dir = /srv/fcache\n"
    "engine = dmcache\n"
    "cache_size = 2G   # inline comment\n"
    "block_size = 64KiB ; other inline comment\n"
    "migration_listen = [::1]:7441\n"
    "migration_tls = x509\n"
    "migration_tls_dir = /etc/pki/fcache\n"
    "export_dir = /run/x/exports#not-a-comment\n"
    "export_group = libvirt-qemu\n"
    "[DEFAULT]\n"
    "log_level = debug\n"
    "log_target = syslog\n"
    "\tnbd_threads = 64\n"
    "origin_connections = 1\n"
    "migration_preload_depth = 16\n"
    "writeback_interval_ms = 250\n"
    "dirty_high_percent = 100\n"
    "metrics_path = /var/lib/node_exporter/textfile_collector/fcache.prom\n"
    "metrics_interval = 300\n";

  assert_int_equal(load_text(&t, text), 0);
  assert_string_equal(t.cfg.metrics_path,
                      "/var/lib/node_exporter/textfile_collector/fcache.prom");
  assert_int_equal(t.cfg.metrics_interval, 300);
  assert_string_equal(t.cfg.control_socket, "/run/x/agent.sock");
  assert_string_equal(t.cfg.control_group, "fcache admins=ops");
  assert_string_equal(t.cfg.export_group, "libvirt-qemu");
  assert_string_equal(t.cfg.state_dir, "/srv/fcache");
  assert_string_equal(t.cfg.engine, "dmcache");
  assert_string_equal(t.cfg.cache_path, "/srv/fcache/cache.img");
  assert_int_equal(t.cfg.cache_size, 2ULL << 30);
  assert_int_equal(t.cfg.block_size, 65536);
  assert_string_equal(t.cfg.migration_listen, "[::1]:7441");
  assert_int_equal(t.cfg.migration_tls, FC_TLS_X509);
  assert_string_equal(t.cfg.migration_tls_dir, "/etc/pki/fcache");
  assert_string_equal(t.cfg.export_dir, "/run/x/exports#not-a-comment");
  assert_int_equal(t.cfg.log_level, FC_LOG_DEBUG);
  assert_int_equal(t.cfg.log_target, FC_LOG_SYSLOG);
  assert_int_equal(t.cfg.nbd_threads, 64);
  assert_int_equal(t.cfg.origin_connections, 1);
  assert_int_equal(t.cfg.migration_preload_depth, 16);
  assert_int_equal(t.cfg.writeback_interval_ms, 250);
  assert_int_equal(t.cfg.dirty_high_percent, 100);
}

static void test_cache_path_resolution(void **state)
{
  struct tmpconf t;

  /* Derived from state_dir wherever state_dir appears. */
  assert_int_equal(load_text(&t, "[agent]\nstate_dir = /a/b/\n"), 0);
  assert_string_equal(t.cfg.cache_path, "/a/b/cache.img");
  /* An explicit cache_path wins, before or after state_dir. */
  assert_int_equal(load_text(&t, "[agent]\ncache_path = /dev/nvme0n1\n"
                                 "state_dir = /a\n"), 0);
  assert_string_equal(t.cfg.cache_path, "/dev/nvme0n1");
  assert_string_equal(t.cfg.state_dir, "/a");
}

/* One bad file: errno, and a message starting "FILE:LINE: key 'KEY': "
 * (or "FILE:LINE: " when key is NULL) and containing `what`. */
static void expect_error(const char *text, int err, unsigned line,
                         const char *key, const char *what)
{
  struct tmpconf t;
  char prefix[256];
  int r = load_text(&t, text);

  if (key)
    snprintf(prefix, sizeof prefix, "%s:%u: key '%s': ", t.path, line, key);
  else
    snprintf(prefix, sizeof prefix, "%s:%u: ", t.path, line);
  if (r != -err || strncmp(t.err, prefix, strlen(prefix)) != 0 ||
      strstr(t.err, what) == NULL)
    fail_msg("file:\n%s\ngot %d '%s'\nwant %d '%s...%s...'", text, r, t.err,
             -err, prefix, what);
}

static void test_syntax_errors(void **state)
{
  expect_error("[agent]\nnbd_thread = 4\n", EINVAL, 2, "nbd_thread",
               "unknown key; known keys: control_socket,");
  expect_error("# x\n[agnet]\n", EINVAL, 2, NULL,
               "unknown section '[agnet]'; allowed: [agent], [DEFAULT]");
  expect_error("[agent]\n\nnbd_threads 4\n", EINVAL, 3, NULL,
               "expected 'key = value'");
  expect_error("[agent\n", EINVAL, 1, NULL, "lacks ']'");
  expect_error("[agent] x\n", EINVAL, 1, NULL, "unexpected text");
  expect_error("[agent]\n = 4\n", EINVAL, 2, NULL, "missing key name");
  expect_error("nbd_threads = 4\n", EINVAL, 1, "nbd_threads",
               "outside any section");
  expect_error("[agent]\nnbd_threads = 4\n[DEFAULT]\nnbd_threads = 5\n",
               EINVAL, 4, "nbd_threads", "already set on line 2");
}

static void test_value_errors(void **state)
{
  char text[600];

  snprintf(text, sizeof text, "[agent]\nstate_dir = /%0300d\n", 0);
  expect_error(text, EINVAL, 2, "state_dir",
               "value is 301 bytes long; at most 255 allowed");
  snprintf(text, sizeof text, "[agent]\ncontrol_socket = /%0120d\n", 0);
  expect_error(text, EINVAL, 2, "control_socket", "at most 106 allowed");
  snprintf(text, sizeof text, "[agent]\ncontrol_group = g%063d\n", 0);
  expect_error(text, EINVAL, 2, "control_group",
               "value is 64 bytes long; at most 63 allowed");
  expect_error("[agent]\nexport_dir = run/exports\n", EINVAL, 2, "export_dir",
               "not an absolute path");
  expect_error("[agent]\nnbd_threads = four\n", EINVAL, 2, "nbd_threads",
               "use an integer from 1 to 64");
  expect_error("[agent]\nnbd_threads = 0\n", EINVAL, 2, "nbd_threads",
               "from 1 to 64");
  expect_error("[agent]\nnbd_threads = 65\n", EINVAL, 2, "nbd_threads",
               "from 1 to 64");
  expect_error("[agent]\nnbd_threads = -1\n", EINVAL, 2, "nbd_threads",
               "from 1 to 64");
  expect_error("[agent]\norigin_connections = 99999999999\n", EINVAL, 2,
               "origin_connections", "from 1 to 64");
  expect_error("[agent]\nmigration_preload_depth = 0\n", EINVAL, 2,
               "migration_preload_depth", "from 1 to 1024");
  expect_error("[agent]\ncloudcache_variant = ondemand\n", EINVAL, 2,
               "cloudcache_variant", "bg_rws");
  expect_error("[agent]\ndirty_high_percent = 101\n", EINVAL, 2,
               "dirty_high_percent", "from 0 to 100");
  expect_error("[agent]\nwriteback_interval_ms = 0\n", EINVAL, 2,
               "writeback_interval_ms", "from 1 to");
  expect_error("[agent]\ncache_size = 10X\n", EINVAL, 2, "cache_size",
               "'10X' is not a size");
  expect_error("[agent]\ncache_size = 99999999999999999999\n", EINVAL, 2,
               "cache_size", "too large");
  expect_error("[agent]\nlog_level = loud\n", EINVAL, 2, "log_level",
               "allowed: error, warning, info, debug");
  expect_error("[agent]\nlog_target = file\n", EINVAL, 2, "log_target",
               "allowed: stderr, syslog");
  expect_error("[agent]\nengine = bcache\n", EINVAL, 2, "engine",
               "unknown engine 'bcache'; allowed: ucache, dmcache");
  expect_error("[agent]\nengine =\n", EINVAL, 2, "engine", "allowed");
  expect_error("[agent]\nmigration_listen = localhost\n", EINVAL, 2,
               "migration_listen", "not host:port");
  expect_error("[agent]\nmigration_listen = h:70000\n", EINVAL, 2,
               "migration_listen", "not host:port");
  expect_error("[agent]\nmigration_tls = off\n", EINVAL, 2, "migration_tls",
               "unknown mode 'off'; allowed: pinned");
  expect_error("[agent]\nmigration_tls = PSK\n", EINVAL, 2, "migration_tls",
               "allowed");
  expect_error("[agent]\nmigration_tls_dir = pki\n", EINVAL, 2,
               "migration_tls_dir", "not an absolute path");
  /* node-exporter reads only *.prom: another name would never be read. */
  expect_error("[agent]\nmetrics_path = /var/lib/ne/fcache.txt\n", EINVAL, 2,
               "metrics_path", "does not end in a file name with '.prom'");
  expect_error("[agent]\nmetrics_path = /var/lib/ne/.prom\n", EINVAL, 2,
               "metrics_path", "'.prom'");
  expect_error("[agent]\nmetrics_path = /var/lib/ne/../fcache.prom\n", EINVAL, 2,
               "metrics_path", "'.' or '..' component");
  expect_error("[agent]\nmetrics_path = ne/fcache.prom\n", EINVAL, 2,
               "metrics_path", "not an absolute path");
  expect_error("[agent]\nmetrics_interval = 0\n", EINVAL, 2,
               "metrics_interval", "from 1 to 300");
  expect_error("[agent]\nmetrics_interval = 301\n", EINVAL, 2,
               "metrics_interval", "from 1 to 300");
}

/* allocation_window: seconds or auto; its bounds in order. */
static void test_allocation_window(void **state)
{
  struct tmpconf t;

  assert_int_equal(load_text(&t, "[agent]\nallocation_window = auto\n"
                                 "allocation_window_min = 60\n"
                                 "allocation_window_max = 86400\n"), 0);
  assert_int_equal(t.cfg.allocation_window, FC_ALLOCATION_WINDOW_AUTO);
  assert_int_equal(t.cfg.allocation_window_min, 60);
  assert_int_equal(t.cfg.allocation_window_max, 86400);
  assert_int_equal(load_text(&t, "[agent]\nallocation_window = 7200\n"), 0);
  assert_int_equal(t.cfg.allocation_window, 7200);
  assert_int_equal(t.cfg.allocation_window_min, 600);
  assert_int_equal(t.cfg.allocation_window_max, 172800);
  expect_error("[agent]\nallocation_window = 0\n", EINVAL, 2, "allocation_window",
               "use auto or an integer from 1 to 2592000");
  expect_error("[agent]\nallocation_window = Auto\n", EINVAL, 2, "allocation_window",
               "use auto or an integer");
  expect_error("[agent]\nallocation_window_min = 0\n", EINVAL, 2,
               "allocation_window_min", "use an integer from 1 to 2592000");
  expect_error("[agent]\nallocation_window_max = 60\nallocation_window_min = 61\n",
               EINVAL, 3, "allocation_window_min",
               "61 is above allocation_window_max 60");
}

static void test_least_privilege_keys(void **state)
{
  struct tmpconf t;
  struct fc_config d;

  fc_config_defaults(&d);
  assert_string_equal(d.control_admin_group, "");
  assert_int_equal(d.n_origin_prefixes, 5);
  assert_string_equal(d.origin_prefixes[0], "/dev/disk/by-path/");
  assert_string_equal(d.origin_prefixes[3], "/dev/rbd");
  assert_string_equal(d.origin_prefixes[4], "/var/lib/nova/mnt/");

  assert_int_equal(load_text(&t, "[agent]\norigin_prefixes = /srv/vols/ , "
                                 "/dev/mapper/cinder-\ncontrol_group = a\n"
                                 "control_admin_group = b\n"), 0);
  assert_int_equal(t.cfg.n_origin_prefixes, 2);
  assert_string_equal(t.cfg.origin_prefixes[0], "/srv/vols/");
  assert_string_equal(t.cfg.origin_prefixes[1], "/dev/mapper/cinder-");
  assert_string_equal(t.cfg.origin_prefixes[2], "");
  assert_string_equal(t.cfg.control_admin_group, "b");
  /* Empty: NBD origins only. */
  assert_int_equal(load_text(&t, "[agent]\norigin_prefixes =\n"), 0);
  assert_int_equal(t.cfg.n_origin_prefixes, 0);

  expect_error("[agent]\norigin_prefixes = dev/disk/\n", EINVAL, 2,
               "origin_prefixes", "'dev/disk/' is not an absolute path "
               "without '.' or '..' components; use comma-separated");
  expect_error("[agent]\norigin_prefixes = /var/lib/../etc/\n", EINVAL, 2,
               "origin_prefixes", "'/var/lib/../etc/' is not an absolute");
  expect_error("[agent]\norigin_prefixes = /srv/./x\n", EINVAL, 2,
               "origin_prefixes", "not an absolute path");
  expect_error("[agent]\norigin_prefixes = /a/,,/b/\n", EINVAL, 2,
               "origin_prefixes", "empty entry in the list");
  expect_error("[agent]\norigin_prefixes = /a/,\n", EINVAL, 2,
               "origin_prefixes", "empty entry at the end");
  expect_error("[agent]\norigin_prefixes = /1,/2,/3,/4,/5,/6,/7,/8,/9,/10,"
               "/11,/12,/13,/14,/15,/16,/17\n", EINVAL, 2, "origin_prefixes",
               "more than 16 prefixes");
  expect_error("[agent]\n\ncontrol_admin_group = nova\n", EINVAL, 3,
               "control_admin_group", "'nova' is set but control_group is "
               "empty");
}

static void test_block_and_cache_size(void **state)
{
  expect_error("[agent]\nblock_size = 3000\n", EINVAL, 2, "block_size",
               "power of two from 512 to 1048576");
  expect_error("[agent]\nblock_size = 256\n", EINVAL, 2, "block_size",
               "power of two");
  expect_error("[agent]\nblock_size = 2M\n", EINVAL, 2, "block_size",
               "power of two");
  expect_error("[agent]\ncache_size = 1000\n", EINVAL, 2, "cache_size",
               "less than one block");
  expect_error("[agent]\ncache_size = 0\n", EINVAL, 2, "cache_size",
               "less than one block");
  expect_error("[agent]\n#\ncache_size = 10000\n", EINVAL, 3, "cache_size",
               "not a multiple of block_size 4096");
  /* Order does not matter: checked once the whole file is read. */
  expect_error("[agent]\ncache_size = 64K\nblock_size = 128K\n", EINVAL, 2,
               "cache_size", "less than one block");
  expect_error("[agent]\nblock_size = 512\ncache_size = 4T\n", EINVAL, 3,
               "cache_size", "use a larger block_size");

  struct tmpconf t;
  assert_int_equal(load_text(&t, "[agent]\ncache_size = 1M\n"
                                 "block_size = 1M\n"), 0);
  assert_int_equal(t.cfg.cache_size, 1 << 20);
  assert_int_equal(t.cfg.block_size, 1 << 20);
  assert_int_equal(load_text(&t, "[agent]\nblock_size = 512\n"), 0);
}

static void test_file_errors(void **state)
{
  struct fc_config cfg, before;
  char err[512];
  int r;

  fc_config_defaults(&cfg);
  r = fc_config_load("/nonexistent/fcache.conf", &cfg, err, sizeof err);
  assert_int_equal(r, -ENOENT);
  assert_non_null(strstr(err, "/nonexistent/fcache.conf"));
  assert_non_null(strstr(err, "No such file or directory"));

  r = fc_config_load("/tmp", &cfg, err, sizeof err);
  assert_int_equal(r, -EISDIR);
  assert_non_null(strstr(err, "/tmp"));
  assert_non_null(strstr(err, "Is a directory"));

  /* A failed load leaves the caller's struct as it was. */
  struct tmpconf t;
  assert_int_equal(load_text(&t, "[agent]\nstate_dir = /x\n"), 0);
  before = t.cfg;
  strcpy(t.path, "/tmp/fcache-test-conf-XXXXXX");
  int fd = mkstemp(t.path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "[agent]\nnbd_threads = 2\nbogus = 1\n", 34), 34);
  close(fd);
  r = fc_config_load(t.path, &t.cfg, err, sizeof err);
  unlink(t.path);
  assert_int_equal(r, -EINVAL);
  assert_memory_equal(&t.cfg, &before, sizeof before);

  /* A tiny error buffer truncates but never overflows. */
  char small[8];
  assert_int_equal(fc_config_load("/nonexistent", &cfg, small, sizeof small),
                   -ENOENT);
  assert_int_equal(strlen(small), 7);
}

static void test_parse_size(void **state)
{
  static const struct { const char *s; uint64_t v; } good[] = {
    { "0", 0 }, { "4096", 4096 }, { "512B", 512 }, { "512b", 512 },
    { "64K", 65536 }, { "64k", 65536 }, { "64KiB", 65536 },
    { "64KB", 65536 }, { "10M", 10ULL << 20 }, { "10MiB", 10ULL << 20 },
    { "2G", 2ULL << 30 }, { "2 GiB", 2ULL << 30 }, { "1T", 1ULL << 40 },
    { "16777215T", 16777215ULL << 40 },
    { "18446744073709551615", UINT64_MAX },
  };
  static const struct { const char *s; int err; } bad[] = {
    { "", -EINVAL }, { "-1", -EINVAL }, { "+1", -EINVAL }, { " 1", -EINVAL },
    { "1.5G", -EINVAL }, { "G", -EINVAL }, { "10X", -EINVAL },
    { "10KiBB", -EINVAL }, { "10Bi", -EINVAL }, { "0x10", -EINVAL },
    { "1P", -EINVAL }, { "10 M x", -EINVAL }, { "1iB", -EINVAL },
    { "18446744073709551616", -ERANGE }, { "16777216T", -ERANGE },
    { "17179869184G", -ERANGE }, { "99999999999999999999999", -ERANGE },
  };
  uint64_t v;

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    v = 12345;
    if (fc_parse_size(good[i].s, &v) != 0 || v != good[i].v)
      fail_msg("'%s' -> %llu", good[i].s, (unsigned long long)v);
  }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 12345;
    int r = fc_parse_size(bad[i].s, &v);
    if (r != bad[i].err || v != 12345)
      fail_msg("'%s' -> %d, want %d", bad[i].s, r, bad[i].err);
  }
}

/* The sample shipped to operators documents every key with its default:
 * uncommented, it must load and equal fc_config_defaults(). */
static void test_sample_matches_defaults(void **state)
{
  FILE *in = fopen("../etc/fcache/agent.conf.sample", "r");
  struct tmpconf t;
  struct fc_config d;
  char line[512], *text;
  size_t len = 0, cap = 65536;
  unsigned keys = 0;

  if (in == NULL)
    skip();                     /* not run from fcache_agent/ */
  text = calloc(1, cap);
  while (fgets(line, sizeof line, in)) {
    const char *l = line;
    /* "#key = value" is a documented default; "# text" is prose. */
    if (line[0] == '#' && line[1] >= 'a' && line[1] <= 'z' &&
        strstr(line, " =")) {
      l = line + 1;
      keys++;
    }
    assert_true(len + strlen(l) < cap);
    strcpy(text + len, l);
    len += strlen(l);
  }
  fclose(in);
  if (load_text(&t, text) != 0)
    fail_msg("sample: %s", t.err);
  free(text);
  assert_int_equal(keys, 45);   /* every key of struct fc_config */
  fc_config_defaults(&d);
  assert_memory_equal(&t.cfg, &d, sizeof d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_empty_file_gives_defaults),
    cmocka_unit_test(test_good_file),
    cmocka_unit_test(test_cache_path_resolution),
    cmocka_unit_test(test_syntax_errors),
    cmocka_unit_test(test_value_errors),
    cmocka_unit_test(test_allocation_window),
    cmocka_unit_test(test_least_privilege_keys),
    cmocka_unit_test(test_block_and_cache_size),
    cmocka_unit_test(test_file_errors),
    cmocka_unit_test(test_parse_size),
    cmocka_unit_test(test_sample_matches_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
