/* SPDX-License-Identifier: Apache-2.0 */
/* Generic-netlink messages of the kernel's NBD client (dm_nbd_msg.h).
 * The numbers are the kernel's own, from its uapi headers; the layout is
 * netlink's: a header, then attributes each padded to 4 bytes, nested
 * ones (NBD_ATTR_SOCKETS) holding attributes of their own. */
#include "dm_nbd_msg.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <linux/genetlink.h>
#include <linux/nbd-netlink.h>
#include <linux/netlink.h>

#define ALIGN4(n) (((n) + 3u) & ~(size_t)3u)
#define GENL_HDR (NLMSG_HDRLEN + GENL_HDRLEN)
/* The largest errno a netlink error message may carry (the kernel's
 * MAX_ERRNO). */
#define MAX_ERRNO 4095

/* A message being written; `full` once something did not fit, after
 * which nothing more is written and the builder answers -ENOSPC. */
struct msg {
  uint8_t *buf;
  size_t cap, len;
  bool full;
};

static void put_bytes(struct msg *m, const void *p, size_t n)
{
  size_t padded = ALIGN4(n);

  if (m->full || padded > m->cap - m->len) {
    m->full = true;
    return;
  }
  memcpy(m->buf + m->len, p, n);
  memset(m->buf + m->len + n, 0, padded - n);
  m->len += padded;
}

/* An attribute's header; its length is set by attr_end.  Returns where it
 * starts. */
static size_t attr_start(struct msg *m, uint16_t type)
{
  struct nlattr a = { .nla_len = 0, .nla_type = type };
  size_t at = m->len;

  put_bytes(m, &a, sizeof a);
  return at;
}

static void attr_end(struct msg *m, size_t at)
{
  struct nlattr a;

  if (m->full)
    return;
  memcpy(&a, m->buf + at, sizeof a);
  /* Nested attributes are far below 64 KiB here (DM_NBD_MSG_MAX). */
  a.nla_len = (uint16_t)(m->len - at);
  memcpy(m->buf + at, &a, sizeof a);
}

static void put_attr(struct msg *m, uint16_t type, const void *p, size_t n)
{
  struct nlattr a = { .nla_len = (uint16_t)(NLA_HDRLEN + n),
                      .nla_type = type };

  put_bytes(m, &a, sizeof a);
  put_bytes(m, p, n);
}

static void put_u32(struct msg *m, uint16_t type, uint32_t v)
{
  put_attr(m, type, &v, sizeof v);
}

static void put_u64(struct msg *m, uint16_t type, uint64_t v)
{
  put_attr(m, type, &v, sizeof v);
}

/* NBD_ATTR_SOCKETS holding one NBD_SOCK_ITEM holding NBD_SOCK_FD. */
static void put_socket(struct msg *m, int fd)
{
  size_t socks = attr_start(m, NBD_ATTR_SOCKETS | NLA_F_NESTED);
  size_t item = attr_start(m, NBD_SOCK_ITEM | NLA_F_NESTED);

  put_u32(m, NBD_SOCK_FD, (uint32_t)fd);
  attr_end(m, item);
  attr_end(m, socks);
}

static void start(struct msg *m, uint8_t *buf, size_t cap, uint16_t type,
                  uint32_t seq, uint8_t cmd, uint8_t version)
{
  struct nlmsghdr h = { .nlmsg_type = type,
                        .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
                        .nlmsg_seq = seq };
  struct genlmsghdr g = { .cmd = cmd, .version = version };

  *m = (struct msg){ .buf = buf, .cap = cap };
  put_bytes(m, &h, sizeof h);
  put_bytes(m, &g, sizeof g);
}

/* The message's length in its header; its length, or -ENOSPC. */
static int finish(struct msg *m)
{
  struct nlmsghdr h;

  if (m->full)
    return -ENOSPC;
  memcpy(&h, m->buf, sizeof h);
  h.nlmsg_len = (uint32_t)m->len;
  memcpy(m->buf, &h, sizeof h);
  return (int)m->len;
}

int dm_nbd_msg_family(uint8_t *buf, size_t cap, uint32_t seq)
{
  static const char name[] = NBD_GENL_FAMILY_NAME;
  struct msg m;

  start(&m, buf, cap, GENL_ID_CTRL, seq, CTRL_CMD_GETFAMILY, 1);
  put_attr(&m, CTRL_ATTR_FAMILY_NAME, name, sizeof name);
  return finish(&m);
}

int dm_nbd_msg_connect(uint8_t *buf, size_t cap, uint16_t family,
                       uint32_t seq, const struct dm_nbd_conf *conf)
{
  struct msg m;

  if (conf->fd < 0)
    return -EINVAL;
  start(&m, buf, cap, family, seq, NBD_CMD_CONNECT, NBD_GENL_VERSION);
  /* Without an index the kernel takes a free device (or makes one). */
  if (conf->index >= 0)
    put_u32(&m, NBD_ATTR_INDEX, (uint32_t)conf->index);
  put_u64(&m, NBD_ATTR_SIZE_BYTES, conf->size);
  put_u64(&m, NBD_ATTR_BLOCK_SIZE_BYTES, conf->block_size);
  put_u64(&m, NBD_ATTR_TIMEOUT, conf->timeout_s);
  put_u64(&m, NBD_ATTR_SERVER_FLAGS, conf->server_flags);
  if (conf->dead_conn_timeout_s)
    put_u64(&m, NBD_ATTR_DEAD_CONN_TIMEOUT, conf->dead_conn_timeout_s);
  put_socket(&m, conf->fd);
  return finish(&m);
}

int dm_nbd_msg_reconfigure(uint8_t *buf, size_t cap, uint16_t family,
                           uint32_t seq, uint32_t index, int fd)
{
  struct msg m;

  if (fd < 0)
    return -EINVAL;
  start(&m, buf, cap, family, seq, NBD_CMD_RECONFIGURE, NBD_GENL_VERSION);
  put_u32(&m, NBD_ATTR_INDEX, index);
  put_socket(&m, fd);
  return finish(&m);
}

int dm_nbd_msg_disconnect(uint8_t *buf, size_t cap, uint16_t family,
                          uint32_t seq, uint32_t index)
{
  struct msg m;

  start(&m, buf, cap, family, seq, NBD_CMD_DISCONNECT, NBD_GENL_VERSION);
  put_u32(&m, NBD_ATTR_INDEX, index);
  return finish(&m);
}

void dm_nbd_answer_init(struct dm_nbd_answer *ans)
{
  *ans = (struct dm_nbd_answer){ .family = -1, .index = -1 };
}

/* The attributes of a generic-netlink answer (after its two headers):
 * the family id in the controller's, the device index in nbd's. */
static int parse_attrs(const uint8_t *p, size_t len, bool ctrl,
                       struct dm_nbd_answer *ans)
{
  size_t off = 0;

  while (len - off >= NLA_HDRLEN) {
    struct nlattr a;
    size_t n;
    unsigned type;

    memcpy(&a, p + off, sizeof a);
    if (a.nla_len < NLA_HDRLEN || a.nla_len > len - off)
      return -EPROTO;
    n = a.nla_len - NLA_HDRLEN;
    type = a.nla_type & NLA_TYPE_MASK;
    if (ctrl && type == CTRL_ATTR_FAMILY_ID) {
      uint16_t id;

      if (n < sizeof id)
        return -EPROTO;
      memcpy(&id, p + off + NLA_HDRLEN, sizeof id);
      ans->family = id;
    } else if (!ctrl && type == NBD_ATTR_INDEX) {
      uint32_t index;

      if (n < sizeof index)
        return -EPROTO;
      memcpy(&index, p + off + NLA_HDRLEN, sizeof index);
      if (index > INT_MAX)
        return -EPROTO;
      ans->index = (int)index;
    }
    off += ALIGN4(a.nla_len);
    if (off >= len)
      return 0;
  }
  return off == len ? 0 : -EPROTO;
}

static int parse_one(const uint8_t *p, const struct nlmsghdr *h,
                     struct dm_nbd_answer *ans)
{
  size_t len = h->nlmsg_len;

  switch (h->nlmsg_type) {
  case NLMSG_ERROR: {
    int32_t err;

    if (len < NLMSG_HDRLEN + sizeof err)
      return -EPROTO;
    memcpy(&err, p + NLMSG_HDRLEN, sizeof err);
    if (err > 0 || err < -MAX_ERRNO)
      return -EPROTO;
    ans->done = true;
    ans->error = err;
    return 0;
  }
  case NLMSG_DONE:
    ans->done = true;
    return 0;
  case NLMSG_NOOP:
  case NLMSG_OVERRUN:
    return 0;
  default:
    if (h->nlmsg_type < NLMSG_MIN_TYPE)
      return 0;
    if (len < GENL_HDR)
      return -EPROTO;
    return parse_attrs(p + GENL_HDR, len - GENL_HDR,
                       h->nlmsg_type == GENL_ID_CTRL, ans);
  }
}

int dm_nbd_msg_parse(const uint8_t *buf, size_t len, uint32_t seq,
                     struct dm_nbd_answer *ans)
{
  size_t off = 0;

  while (off < len) {
    struct nlmsghdr h;
    int r;

    if (len - off < NLMSG_HDRLEN)
      return -EPROTO;
    memcpy(&h, buf + off, sizeof h);
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > len - off)
      return -EPROTO;
    if (h.nlmsg_seq == seq && (r = parse_one(buf + off, &h, ans)) < 0)
      return r;
    /* The last message of a datagram need not be padded. */
    if (ALIGN4(h.nlmsg_len) >= len - off)
      break;
    off += ALIGN4(h.nlmsg_len);
  }
  return 0;
}
