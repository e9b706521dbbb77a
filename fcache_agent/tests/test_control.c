/* SPDX-License-Identifier: Apache-2.0 */
/* Control socket server, exercised through a real unix socket: good
 * requests, pipelining, every kind of malformed request, the size limit,
 * socket permissions, stale sockets, the connection cap and shutdown. */
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
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control.h"
#include "common/log.h"

struct fixture {
  char dir[64];
  char sock[128];
  int calls;                    /* handler invocations, via opaque */
  struct fc_control *ctl;
};

static int op_echo(void *opaque, json_t *args, json_t **result, char *err,
                   size_t errlen)
{
  ((struct fixture *)opaque)->calls++;
  *result = json_deep_copy(args);
  return 0;
}

static int op_fail(void *opaque, json_t *args, json_t **result, char *err,
                   size_t errlen)
{
  snprintf(err, errlen, "volume '%s' not found",
           json_string_value(json_object_get(args, "name")));
  return -ENOENT;
}

static int op_silent_fail(void *opaque, json_t *args, json_t **result,
                          char *err, size_t errlen)
{
  *result = json_object();      /* must be released by the server */
  return -EIO;
}

static int op_noresult(void *opaque, json_t *args, json_t **result, char *err,
                       size_t errlen)
{
  return 0;
}

/* "typed" echoes what its table (control_args.h) let through. */
static const struct fc_control_arg typed_args[] = {
  { "id", FC_ARG_STRING, true, 0, 0, "a name" },
  { "n", FC_ARG_UINT, false, 2, 9, "a small number" },
  { "size", FC_ARG_SIZE, false, 0, 0, "bytes" },
  { "flag", FC_ARG_BOOL, false, 0, 0, "yes or no" },
  { "list", FC_ARG_UINT_LIST, false, 0, 100, "numbers" },
  FC_CONTROL_ARGS_END,
};

static const struct fc_control_arg nothing[] = { FC_CONTROL_ARGS_END };

static const struct fc_control_op ops[] = {
  { "echo", op_echo, FC_CONTROL_ADMIN, NULL, NULL },
  { "typed", op_echo, FC_CONTROL_ADMIN, NULL, typed_args },
  { "bare", op_echo, FC_CONTROL_ADMIN, NULL, nothing },
  { "fail", op_fail, FC_CONTROL_ADMIN, NULL, NULL },
  { "silent-fail", op_silent_fail, FC_CONTROL_ADMIN, NULL, NULL },
  { "noresult", op_noresult, FC_CONTROL_ADMIN, NULL, NULL },
  { NULL, NULL, FC_CONTROL_ADMIN, NULL, NULL },
};

static int setup(void **state)
{
  struct fixture *f = calloc(1, sizeof *f);

  strcpy(f->dir, "/tmp/fcache-test-ctl-XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  snprintf(f->sock, sizeof f->sock, "%s/agent.sock", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  struct fixture *f = *state;

  fc_control_stop(f->ctl);
  unlink(f->sock);
  rmdir(f->dir);
  free(f);
  return 0;
}

static void start(struct fixture *f, const char *group)
{
  f->ctl = fc_control_start(f->sock, group, "", ops, f);
  assert_non_null(f->ctl);
}

static int connect_to(const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct timeval tv = { .tv_sec = 10 };   /* a bug fails, never hangs */
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  assert_true(fd >= 0);
  strcpy(addr.sun_path, path);
  assert_int_equal(connect(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

static void send_str(int fd, const char *s, size_t len)
{
  while (len > 0) {
    ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
    assert_true(n > 0);
    s += n;
    len -= (size_t)n;
  }
}

/* Reads one response line byte by byte (so nothing of the next line is
 * consumed); NULL when the server has closed the connection.  A reset
 * counts as closed: the server may close with our bytes still unread. */
static json_t *read_response(int fd)
{
  static char line[2 * FC_CONTROL_MAX_MSG];
  size_t len = 0;
  json_error_t jerr;
  json_t *j;

  for (;;) {
    ssize_t n = recv(fd, line + len, 1, 0);
    if (n < 0 && errno == ECONNRESET)
      return NULL;
    if (n < 0)
      fail_msg("recv: %s", strerror(errno));
    if (n == 0)
      return NULL;
    if (line[len] == '\n')
      break;
    assert_true(++len < sizeof line);
  }
  j = json_loadb(line, len, 0, &jerr);
  if (j == NULL)
    fail_msg("bad response '%.*s': %s", (int)len, line, jerr.text);
  return j;
}

static json_t *request(int fd, const char *req)
{
  send_str(fd, req, strlen(req));
  json_t *resp = read_response(fd);
  assert_non_null(resp);
  return resp;
}

/* Checks an error response: errno and a substring of the message. */
static void expect_error(json_t *resp, int err, const char *what)
{
  const char *msg = json_string_value(json_object_get(resp, "error"));

  assert_true(json_is_false(json_object_get(resp, "ok")));
  assert_int_equal(json_integer_value(json_object_get(resp, "errno")), err);
  assert_non_null(msg);
  if (strstr(msg, what) == NULL)
    fail_msg("error '%s' lacks '%s'", msg, what);
  json_decref(resp);
}

static void expect_ok(json_t *resp, const char *result_json)
{
  json_t *want = json_loads(result_json, 0, NULL);

  assert_true(json_is_true(json_object_get(resp, "ok")));
  assert_true(json_equal(json_object_get(resp, "result"), want));
  json_decref(want);
  json_decref(resp);
}

static void test_good_requests(void **state)
{
  struct fixture *f = *state;
  int fd;

  /* Debug level exercises the SO_PEERCRED logging path.  Safe to switch
   * here: no server thread is running between tests. */
  fc_log_setup(FC_LOG_STDERR, FC_LOG_DEBUG);
  start(f, "");
  fd = connect_to(f->sock);
  expect_ok(request(fd, "{\"op\":\"echo\",\"args\":{\"a\":[1,2]}}\n"),
            "{\"a\":[1,2]}");
  expect_ok(request(fd, "{\"op\":\"echo\"}\n"), "{}");
  expect_ok(request(fd, "  {\"args\": {}, \"op\": \"noresult\"}\r\n"), "{}");
  /* Blank lines are skipped, not answered. */
  expect_ok(request(fd, "\n\r\n{\"op\":\"echo\",\"args\":{\"x\":1}}\n"),
            "{\"x\":1}");
  assert_int_equal(f->calls, 3);

  expect_error(request(fd, "{\"op\":\"fail\",\"args\":{\"name\":\"v1\"}}\n"),
               ENOENT, "volume 'v1' not found");
  expect_error(request(fd, "{\"op\":\"silent-fail\"}\n"), EIO,
               "Input/output error");
  close(fd);
  fc_control_stop(f->ctl);
  f->ctl = NULL;
  fc_log_setup(FC_LOG_STDERR, FC_LOG_WARNING);
}

/* A request that does not match its operation's table is refused before
 * the handler runs, naming the argument; null is an absent argument, but
 * an unknown name is refused whatever its value. */
static void test_argument_table(void **state)
{
  struct fixture *f = *state;
  static const struct {
    const char *args, *says;
  } bad[] = {
    { "{}", "missing argument 'id' of 'typed' (a string)" },
    { "{\"id\":null}", "missing argument 'id'" },
    { "{\"id\":5}", "argument 'id' of 'typed' must be a string" },
    { "{\"id\":\"a\",\"n\":1}", "'n' of 'typed' must be an integer from 2 to 9" },
    { "{\"id\":\"a\",\"n\":10}", "from 2 to 9" },
    { "{\"id\":\"a\",\"n\":-3}", "from 2 to 9" },
    { "{\"id\":\"a\",\"n\":\"4\"}", "from 2 to 9" },
    { "{\"id\":\"a\",\"size\":0}", "positive size" },
    { "{\"id\":\"a\",\"size\":\"lots\"}", "positive size" },
    { "{\"id\":\"a\",\"flag\":1}", "true or false" },
    { "{\"id\":\"a\",\"list\":[1,101]}", "a list of integers from 0 to 100" },
    { "{\"id\":\"a\",\"list\":5}", "a list of integers" },
    { "{\"id\":\"a\",\"colour\":\"red\"}",
      "'typed' takes no argument 'colour'; it takes: id, n, size, flag, list" },
  };
  char req[256];
  int fd;

  start(f, "");
  fd = connect_to(f->sock);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(req, sizeof req, "{\"op\":\"typed\",\"args\":%s}\n", bad[i].args);
    expect_error(request(fd, req), EINVAL, bad[i].says);
  }
  assert_int_equal(f->calls, 0);
  expect_error(request(fd, "{\"op\":\"bare\",\"args\":{\"x\":1}}\n"), EINVAL,
               "'bare' takes no argument 'x'; it takes: no arguments");
  expect_ok(request(fd, "{\"op\":\"typed\",\"args\":{\"id\":\"a\",\"n\":9,"
                        "\"size\":\"4K\",\"flag\":false,\"list\":[0,100]}}\n"),
            "{\"id\":\"a\",\"n\":9,\"size\":\"4K\",\"flag\":false,"
            "\"list\":[0,100]}");
  expect_ok(request(fd, "{\"op\":\"typed\",\"args\":{\"id\":\"b\",\"n\":null}}\n"),
            "{\"id\":\"b\",\"n\":null}");
  expect_ok(request(fd, "{\"op\":\"bare\"}\n"), "{}");
  assert_int_equal(f->calls, 3);
  close(fd);
}

/* What capabilities and --control-schema publish of a table. */
static void test_argument_table_json(void **state)
{
  json_t *got = fc_control_ops_json(ops);
  json_t *typed = json_object_get(json_object_get(got, "typed"), "arguments");
  json_t *n = json_object_get(typed, "n");

  (void)state;
  assert_int_equal(json_object_size(typed), 5);
  assert_string_equal(json_string_value(json_object_get(n, "type")), "integer");
  assert_int_equal(json_integer_value(json_object_get(n, "min")), 2);
  assert_int_equal(json_integer_value(json_object_get(n, "max")), 9);
  assert_true(json_is_false(json_object_get(n, "required")));
  assert_true(json_is_true(json_object_get(json_object_get(typed, "id"), "required")));
  assert_null(json_object_get(json_object_get(typed, "size"), "max"));
  assert_true(json_is_null(json_object_get(json_object_get(got, "echo"), "arguments")));
  assert_int_equal(json_object_size(json_object_get(json_object_get(got, "bare"),
                                                    "arguments")), 0);
  assert_string_equal(json_string_value(json_object_get(json_object_get(got, "echo"),
                                                        "access")), "admin");
  json_decref(got);
}

static void test_pipelined_requests(void **state)
{
  struct fixture *f = *state;
  const char *three = "{\"op\":\"echo\",\"args\":{\"n\":1}}\n"
                      "{\"op\":\"nope\"}\n"
                      "{\"op\":\"echo\",\"args\":{\"n\":3}}\n";
  int fd;

  start(f, "");
  fd = connect_to(f->sock);
  send_str(fd, three, strlen(three));
  expect_ok(read_response(fd), "{\"n\":1}");
  expect_error(read_response(fd), EOPNOTSUPP, "unknown operation 'nope'");
  expect_ok(read_response(fd), "{\"n\":3}");

  /* A request split across writes is reassembled. */
  send_str(fd, "{\"op\":\"ec", 9);
  usleep(20000);
  expect_ok(request(fd, "ho\",\"args\":{\"n\":4}}\n"), "{\"n\":4}");

  /* A last request without newline is answered at end of input. */
  send_str(fd, "{\"op\":\"echo\",\"args\":{\"n\":5}}", 28);
  shutdown(fd, SHUT_WR);
  expect_ok(read_response(fd), "{\"n\":5}");
  assert_null(read_response(fd));
  close(fd);
}

static void test_malformed_requests(void **state)
{
  struct fixture *f = *state;
  int fd;

  start(f, "");
  fd = connect_to(f->sock);
  expect_error(request(fd, "{\"op\": \"echo\",\n"), EINVAL, "invalid JSON");
  expect_error(request(fd, "not json\n"), EINVAL, "invalid JSON");
  expect_error(request(fd, "\xff\xfe\n"), EINVAL, "invalid JSON");
  expect_error(request(fd, "[1,2]\n"), EINVAL, "must be a JSON object");
  expect_error(request(fd, "5\n"), EINVAL, "must be a JSON object");
  expect_error(request(fd, "{}\n"), EINVAL, "string member 'op'");
  expect_error(request(fd, "{\"op\":7}\n"), EINVAL, "string member 'op'");
  expect_error(request(fd, "{\"op\":\"echo\",\"op\":\"echo\"}\n"), EINVAL,
               "duplicate");
  expect_error(request(fd, "{\"op\":\"echo\",\"args\":[1]}\n"), EINVAL,
               "'args' must be a JSON object");
  expect_error(request(fd, "{\"op\":\"echo\",\"args\":null}\n"), EINVAL,
               "'args' must be a JSON object");
  expect_error(request(fd, "{\"op\":\"volume-shwo\"}\n"), EOPNOTSUPP,
               "unknown operation 'volume-shwo'; known: echo, typed, bare, fail, "
               "silent-fail, noresult");
  /* Non-ASCII in an unknown name still yields a valid response. */
  expect_error(request(fd, "{\"op\":\"\xc3\xa9t\xc3\xa9\"}\n"), EOPNOTSUPP,
               "unknown operation");
  /* After all that, the connection still works. */
  expect_ok(request(fd, "{\"op\":\"echo\",\"args\":{\"ok\":true}}\n"),
            "{\"ok\":true}");
  assert_int_equal(f->calls, 1);
  close(fd);
}

/* Builds {"op":"echo","args":{"s":"xxx..."}} of exactly `size` bytes. */
static char *make_request(size_t size)
{
  const char *head = "{\"op\":\"echo\",\"args\":{\"s\":\"", *tail = "\"}}";
  char *buf = malloc(size + 2);
  size_t h = strlen(head), t = strlen(tail);

  memcpy(buf, head, h);
  memset(buf + h, 'x', size - h - t);
  memcpy(buf + size - t, tail, t);
  buf[size] = '\n';
  buf[size + 1] = '\0';
  return buf;
}

static void test_size_limit(void **state)
{
  struct fixture *f = *state;
  char *max = make_request(FC_CONTROL_MAX_MSG);
  char *big = make_request(FC_CONTROL_MAX_MSG + 1);
  json_t *resp;
  int fd;

  start(f, "");
  fd = connect_to(f->sock);
  send_str(fd, max, strlen(max));
  resp = read_response(fd);
  assert_non_null(resp);
  assert_true(json_is_true(json_object_get(resp, "ok")));
  json_decref(resp);

  /* The server may hang up before taking every byte: don't assert. */
  send(fd, big, strlen(big), MSG_NOSIGNAL);
  resp = read_response(fd);
  assert_non_null(resp);
  json_t *want = json_pack("{s:b,s:s,s:i}", "ok", 0, "error",
                           "request larger than 65536 bytes", "errno", 90);
  assert_true(json_equal(resp, want));
  json_decref(want);
  json_decref(resp);
  assert_null(read_response(fd));         /* then the server hangs up */
  close(fd);
  free(max);
  free(big);

  /* Oversized with no newline at all is caught too. */
  fd = connect_to(f->sock);
  big = calloc(1, 100000);
  memset(big, '{', 99999);
  send(fd, big, 99999, MSG_NOSIGNAL);
  expect_error(read_response(fd), EMSGSIZE, "request larger than 65536");
  assert_null(read_response(fd));
  close(fd);
  free(big);
}

static mode_t socket_mode(const char *path, gid_t *gid)
{
  struct stat st;

  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  *gid = st.st_gid;
  return st.st_mode & 07777;
}

static void test_socket_permissions(void **state)
{
  struct fixture *f = *state;
  gid_t gid;

  start(f, "");
  assert_int_equal(socket_mode(f->sock, &gid), 0600);
  fc_control_stop(f->ctl);
  f->ctl = NULL;
  assert_int_equal(access(f->sock, F_OK), -1);      /* stop unlinks it */

  if (geteuid() != 0)
    skip();                     /* chown to group root needs root */
  start(f, "root");
  assert_int_equal(socket_mode(f->sock, &gid), 0660);
  assert_int_equal(gid, 0);
  fc_control_stop(f->ctl);
  f->ctl = NULL;

  errno = 0;
  assert_null(fc_control_start(f->sock, "no-such-group-fcache", "", ops, f));
  assert_int_equal(errno, ENOENT);
  assert_int_equal(access(f->sock, F_OK), -1);
}

static void test_existing_socket_file(void **state)
{
  struct fixture *f = *state;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct fc_control *second;
  int fd;

  /* A stale socket (bound, nobody listening) is replaced. */
  strcpy(addr.sun_path, f->sock);
  fd = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
  close(fd);
  start(f, "");

  /* A live one is left alone. */
  errno = 0;
  second = fc_control_start(f->sock, "", "", ops, f);
  assert_null(second);
  assert_int_equal(errno, EADDRINUSE);
  fd = connect_to(f->sock);
  expect_ok(request(fd, "{\"op\":\"noresult\"}\n"), "{}");
  close(fd);
  fc_control_stop(f->ctl);
  f->ctl = NULL;

  /* So is a file that is not a socket. */
  fd = open(f->sock, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  errno = 0;
  assert_null(fc_control_start(f->sock, "", "", ops, f));
  assert_int_equal(errno, EEXIST);
  assert_int_equal(access(f->sock, F_OK), 0);
}

static void test_connection_cap(void **state)
{
  struct fixture *f = *state;
  int fds[32], extra;

  start(f, "");
  for (int i = 0; i < 32; i++) {
    fds[i] = connect_to(f->sock);
    expect_ok(request(fds[i], "{\"op\":\"noresult\"}\n"), "{}");
  }
  extra = connect_to(f->sock);
  expect_error(read_response(extra), EAGAIN, "too many control connections");
  assert_null(read_response(extra));
  close(extra);
  for (int i = 0; i < 32; i++)
    close(fds[i]);
}

static void test_stop_with_clients(void **state)
{
  struct fixture *f = *state;
  int idle, partial;

  start(f, "");
  idle = connect_to(f->sock);
  expect_ok(request(idle, "{\"op\":\"noresult\"}\n"), "{}");
  partial = connect_to(f->sock);
  send_str(partial, "{\"op\":", 6);
  fc_control_stop(f->ctl);      /* must not wait for the clients */
  f->ctl = NULL;
  assert_null(read_response(idle));
  assert_null(read_response(partial));
  close(idle);
  close(partial);
  fc_control_stop(NULL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_good_requests, setup, teardown),
    cmocka_unit_test_setup_teardown(test_argument_table, setup, teardown),
    cmocka_unit_test(test_argument_table_json),
    cmocka_unit_test_setup_teardown(test_pipelined_requests, setup, teardown),
    cmocka_unit_test_setup_teardown(test_malformed_requests, setup, teardown),
    cmocka_unit_test_setup_teardown(test_size_limit, setup, teardown),
    cmocka_unit_test_setup_teardown(test_socket_permissions, setup, teardown),
    cmocka_unit_test_setup_teardown(test_existing_socket_file, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_connection_cap, setup, teardown),
    cmocka_unit_test_setup_teardown(test_stop_with_clients, setup, teardown),
  };

  fc_log_setup(FC_LOG_STDERR, FC_LOG_WARNING);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
