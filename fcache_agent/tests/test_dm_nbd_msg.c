/* SPDX-License-Identifier: Apache-2.0 */
/* dmcache/dm_nbd_msg.c: the generic-netlink requests to the kernel's NBD
 * client, byte by byte as nbd-netlink.h lays them out (headers, attribute
 * lengths and padding, the nested socket list), and the parsing of the
 * kernel's answers, well-formed and not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>

#include "dmcache/dm_nbd_msg.h"

#define FAMILY 0x1b

/* The attribute of type `type` (flags masked) at the top level of the
 * attributes p[0..len), or NULL. */
static const struct nlattr *find(const uint8_t *p, size_t len, unsigned type)
{
  size_t off = 0;

  while (off + NLA_HDRLEN <= len) {
    const struct nlattr *a = (const struct nlattr *)(p + off);

    assert_true(a->nla_len >= NLA_HDRLEN && a->nla_len <= len - off);
    if ((a->nla_type & NLA_TYPE_MASK) == type)
      return a;
    off += NLA_ALIGN(a->nla_len);
  }
  return NULL;
}

static const uint8_t *payload(const struct nlattr *a)
{
  return (const uint8_t *)a + NLA_HDRLEN;
}

static uint64_t u64_of(const uint8_t *attrs, size_t len, unsigned type)
{
  const struct nlattr *a = find(attrs, len, type);
  uint64_t v;

  assert_non_null(a);
  assert_int_equal(a->nla_len, NLA_HDRLEN + 8);
  memcpy(&v, payload(a), 8);
  return v;
}

/* The headers of a request; its attributes in *attrs, *alen. */
static void headers(const uint8_t *buf, int len, uint16_t type, uint8_t cmd,
                    uint8_t version, uint32_t seq, const uint8_t **attrs,
                    size_t *alen)
{
  const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
  const struct genlmsghdr *g = (const struct genlmsghdr *)(buf + NLMSG_HDRLEN);

  assert_true(len > 0 && len <= (int)DM_NBD_MSG_MAX);
  assert_int_equal(len % 4, 0);
  assert_int_equal(h->nlmsg_len, len);
  assert_int_equal(h->nlmsg_type, type);
  assert_int_equal(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK);
  assert_int_equal(h->nlmsg_seq, seq);
  assert_int_equal(h->nlmsg_pid, 0);
  assert_int_equal(g->cmd, cmd);
  assert_int_equal(g->version, version);
  *attrs = buf + NLMSG_HDRLEN + GENL_HDRLEN;
  *alen = (size_t)len - NLMSG_HDRLEN - GENL_HDRLEN;
}

/* NBD_ATTR_SOCKETS > NBD_SOCK_ITEM > NBD_SOCK_FD == fd, both nested. */
static void assert_socket(const uint8_t *attrs, size_t alen, int fd)
{
  const struct nlattr *socks = find(attrs, alen, NBD_ATTR_SOCKETS), *item, *a;
  uint32_t v;

  assert_non_null(socks);
  assert_true(socks->nla_type & NLA_F_NESTED);
  item = find(payload(socks), socks->nla_len - NLA_HDRLEN, NBD_SOCK_ITEM);
  assert_non_null(item);
  assert_true(item->nla_type & NLA_F_NESTED);
  assert_int_equal(socks->nla_len, NLA_HDRLEN + item->nla_len);
  a = find(payload(item), item->nla_len - NLA_HDRLEN, NBD_SOCK_FD);
  assert_non_null(a);
  assert_int_equal(a->nla_len, NLA_HDRLEN + 4);
  memcpy(&v, payload(a), 4);
  assert_int_equal(v, fd);
}

static void test_family_request(void **state)
{
  uint8_t buf[DM_NBD_MSG_MAX];
  const uint8_t *attrs;
  size_t alen;
  const struct nlattr *a;
  int len = dm_nbd_msg_family(buf, sizeof buf, 7);

  headers(buf, len, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, 7, &attrs, &alen);
  a = find(attrs, alen, CTRL_ATTR_FAMILY_NAME);
  assert_non_null(a);
  /* "nbd" and its NUL, padded to 4. */
  assert_int_equal(a->nla_len, NLA_HDRLEN + 4);
  assert_memory_equal(payload(a), "nbd", 4);
  assert_int_equal(alen, 8);
}

static void test_connect_request(void **state)
{
  struct dm_nbd_conf conf = {
    .index = 3, .size = 8u << 20, .block_size = 4096, .timeout_s = 0,
    .dead_conn_timeout_s = 30, .server_flags = 0x107, .fd = 9,
  };
  uint8_t buf[DM_NBD_MSG_MAX];
  const uint8_t *attrs;
  size_t alen;
  const struct nlattr *a;
  uint32_t index;
  int len = dm_nbd_msg_connect(buf, sizeof buf, FAMILY, 12, &conf);

  headers(buf, len, FAMILY, NBD_CMD_CONNECT, NBD_GENL_VERSION, 12, &attrs,
          &alen);
  a = find(attrs, alen, NBD_ATTR_INDEX);
  assert_non_null(a);
  assert_int_equal(a->nla_len, NLA_HDRLEN + 4);
  memcpy(&index, payload(a), 4);
  assert_int_equal(index, 3);
  assert_int_equal(u64_of(attrs, alen, NBD_ATTR_SIZE_BYTES), 8u << 20);
  assert_int_equal(u64_of(attrs, alen, NBD_ATTR_BLOCK_SIZE_BYTES), 4096);
  assert_int_equal(u64_of(attrs, alen, NBD_ATTR_TIMEOUT), 0);
  assert_int_equal(u64_of(attrs, alen, NBD_ATTR_SERVER_FLAGS), 0x107);
  assert_int_equal(u64_of(attrs, alen, NBD_ATTR_DEAD_CONN_TIMEOUT), 30);
  assert_null(find(attrs, alen, NBD_ATTR_CLIENT_FLAGS));
  assert_socket(attrs, alen, 9);

  /* Any free device, and no dead-connection timeout: neither attribute. */
  conf.index = -1;
  conf.dead_conn_timeout_s = 0;
  len = dm_nbd_msg_connect(buf, sizeof buf, FAMILY, 13, &conf);
  headers(buf, len, FAMILY, NBD_CMD_CONNECT, NBD_GENL_VERSION, 13, &attrs,
          &alen);
  assert_null(find(attrs, alen, NBD_ATTR_INDEX));
  assert_null(find(attrs, alen, NBD_ATTR_DEAD_CONN_TIMEOUT));
  assert_socket(attrs, alen, 9);

  conf.fd = -1;
  assert_int_equal(dm_nbd_msg_connect(buf, sizeof buf, FAMILY, 14, &conf),
                   -EINVAL);
}

static void test_reconfigure_and_disconnect(void **state)
{
  uint8_t buf[DM_NBD_MSG_MAX];
  const uint8_t *attrs;
  size_t alen;
  const struct nlattr *a;
  uint32_t index;
  int len = dm_nbd_msg_reconfigure(buf, sizeof buf, FAMILY, 5, 2, 11);

  headers(buf, len, FAMILY, NBD_CMD_RECONFIGURE, NBD_GENL_VERSION, 5, &attrs,
          &alen);
  a = find(attrs, alen, NBD_ATTR_INDEX);
  assert_non_null(a);
  memcpy(&index, payload(a), 4);
  assert_int_equal(index, 2);
  assert_socket(attrs, alen, 11);
  assert_int_equal(dm_nbd_msg_reconfigure(buf, sizeof buf, FAMILY, 5, 2, -1),
                   -EINVAL);

  len = dm_nbd_msg_disconnect(buf, sizeof buf, FAMILY, 6, 4);
  headers(buf, len, FAMILY, NBD_CMD_DISCONNECT, NBD_GENL_VERSION, 6, &attrs,
          &alen);
  assert_int_equal(alen, 8);
  a = find(attrs, alen, NBD_ATTR_INDEX);
  memcpy(&index, payload(a), 4);
  assert_int_equal(index, 4);
}

/* Every length short of the whole message is -ENOSPC, never a write past
 * the buffer (ASan watches the heap copy). */
static void test_small_buffers(void **state)
{
  struct dm_nbd_conf conf = { .index = 1, .size = 1 << 20, .block_size = 512,
                              .fd = 3 };
  uint8_t full[DM_NBD_MSG_MAX];
  int need = dm_nbd_msg_connect(full, sizeof full, FAMILY, 1, &conf);
  int need_disc = dm_nbd_msg_disconnect(full, sizeof full, FAMILY, 1, 1);

  assert_true(need > 0 && need_disc > 0);
  for (int cap = 0; cap < need; cap++) {
    uint8_t *buf = malloc(cap ? (size_t)cap : 1);

    assert_int_equal(dm_nbd_msg_connect(buf, (size_t)cap, FAMILY, 1, &conf),
                     -ENOSPC);
    if (cap < need_disc)
      assert_int_equal(dm_nbd_msg_disconnect(buf, (size_t)cap, FAMILY, 1, 1),
                       -ENOSPC);
    free(buf);
  }
}

/* An answer the kernel could send: a message of `type` for seq carrying
 * attrs, in buf; its length. */
static size_t answer(uint8_t *buf, uint16_t type, uint32_t seq,
                     const void *attrs, size_t alen)
{
  struct nlmsghdr h = { .nlmsg_len = (uint32_t)(NLMSG_HDRLEN + GENL_HDRLEN + alen),
                        .nlmsg_type = type, .nlmsg_seq = seq };
  struct genlmsghdr g = { .cmd = 1, .version = 1 };

  memcpy(buf, &h, sizeof h);
  memcpy(buf + NLMSG_HDRLEN, &g, sizeof g);
  memcpy(buf + NLMSG_HDRLEN + GENL_HDRLEN, attrs, alen);
  return h.nlmsg_len;
}

static size_t ack(uint8_t *buf, uint32_t seq, int32_t err)
{
  struct nlmsghdr h = { .nlmsg_len = NLMSG_HDRLEN + 4 + NLMSG_HDRLEN,
                        .nlmsg_type = NLMSG_ERROR, .nlmsg_seq = seq };

  memset(buf, 0, h.nlmsg_len);
  memcpy(buf, &h, sizeof h);
  memcpy(buf + NLMSG_HDRLEN, &err, 4);
  return h.nlmsg_len;
}

static void test_parse_answers(void **state)
{
  /* The controller's answer: a name, then the id (u16, padded). */
  uint8_t ctrl_attrs[] = { 8, 0, CTRL_ATTR_FAMILY_NAME, 0, 'n', 'b', 'd', 0,
                           6, 0, CTRL_ATTR_FAMILY_ID, 0, FAMILY, 0, 0, 0 };
  uint8_t nbd_attrs[] = { 8, 0, NBD_ATTR_INDEX, 0, 5, 0, 0, 0 };
  uint8_t buf[256];
  struct dm_nbd_answer ans;
  size_t n;

  dm_nbd_answer_init(&ans);
  n = answer(buf, GENL_ID_CTRL, 3, ctrl_attrs, sizeof ctrl_attrs);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 3, &ans), 0);
  assert_int_equal(ans.family, FAMILY);
  assert_false(ans.done);
  n = ack(buf, 3, 0);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 3, &ans), 0);
  assert_true(ans.done);
  assert_int_equal(ans.error, 0);
  assert_int_equal(ans.index, -1);

  /* The device index and the ack in one datagram. */
  dm_nbd_answer_init(&ans);
  n = answer(buf, FAMILY, 4, nbd_attrs, sizeof nbd_attrs);
  n += ack(buf + n, 4, 0);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 4, &ans), 0);
  assert_int_equal(ans.index, 5);
  assert_true(ans.done);

  /* An error for our request; an answer to an older one is ignored. */
  dm_nbd_answer_init(&ans);
  n = answer(buf, FAMILY, 3, nbd_attrs, sizeof nbd_attrs);
  n += ack(buf + n, 3, -EBUSY);
  n += ack(buf + n, 9, -ENOSPC);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 9, &ans), 0);
  assert_true(ans.done);
  assert_int_equal(ans.error, -ENOSPC);
  assert_int_equal(ans.index, -1);

  /* A built request parses as an answer (its index attribute). */
  struct dm_nbd_conf conf = { .index = 6, .size = 4096, .block_size = 512,
                              .fd = 0 };
  dm_nbd_answer_init(&ans);
  n = (size_t)dm_nbd_msg_connect(buf, sizeof buf, FAMILY, 2, &conf);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 2, &ans), 0);
  assert_int_equal(ans.index, 6);
  assert_false(ans.done);
}

static void test_parse_malformed(void **state)
{
  uint8_t nbd_attrs[] = { 8, 0, NBD_ATTR_INDEX, 0, 5, 0, 0, 0 };
  uint8_t buf[256];
  struct dm_nbd_answer ans;
  struct nlmsghdr h;
  size_t n;

  dm_nbd_answer_init(&ans);
  /* Every truncation of a well-formed answer is refused. */
  n = answer(buf, FAMILY, 1, nbd_attrs, sizeof nbd_attrs);
  for (size_t cut = 1; cut < n; cut++)
    assert_int_equal(dm_nbd_msg_parse(buf, cut, 1, &ans), -EPROTO);
  /* A header that claims more than the datagram holds. */
  memcpy(&h, buf, sizeof h);
  h.nlmsg_len = (uint32_t)n + 4;
  memcpy(buf, &h, sizeof h);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  /* Or less than a header. */
  h.nlmsg_len = 8;
  memcpy(buf, &h, sizeof h);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  /* An attribute longer than its message. */
  nbd_attrs[0] = 12;
  n = answer(buf, FAMILY, 1, nbd_attrs, sizeof nbd_attrs);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  /* An index too short, or beyond an int. */
  uint8_t short_index[] = { 6, 0, NBD_ATTR_INDEX, 0, 5, 0, 0, 0 };
  n = answer(buf, FAMILY, 1, short_index, sizeof short_index);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  uint8_t huge_index[] = { 8, 0, NBD_ATTR_INDEX, 0, 0xff, 0xff, 0xff, 0xff };
  n = answer(buf, FAMILY, 1, huge_index, sizeof huge_index);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  /* An error that is not an errno. */
  n = ack(buf, 1, 1);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  n = ack(buf, 1, -5000);
  assert_int_equal(dm_nbd_msg_parse(buf, n, 1, &ans), -EPROTO);
  /* An error message too short for its code. */
  h = (struct nlmsghdr){ .nlmsg_len = NLMSG_HDRLEN + 2,
                         .nlmsg_type = NLMSG_ERROR, .nlmsg_seq = 1 };
  memset(buf, 0, sizeof buf);
  memcpy(buf, &h, sizeof h);
  assert_int_equal(dm_nbd_msg_parse(buf, NLMSG_HDRLEN + 2, 1, &ans), -EPROTO);
  assert_false(ans.done);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_family_request),
    cmocka_unit_test(test_connect_request),
    cmocka_unit_test(test_reconfigure_and_disconnect),
    cmocka_unit_test(test_small_buffers),
    cmocka_unit_test(test_parse_answers),
    cmocka_unit_test(test_parse_malformed),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
