/* SPDX-License-Identifier: Apache-2.0 */
/* NBD fixed-newstyle handshake; see nbd_handshake.h. */
#include "nbd_handshake.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "common/fdio.h"
#include "common/log.h"
#include "nbd_meta.h"
#include "nbd_proto.h"
#include "nbd_request.h"

int nbd_recv_full(int fd, void *buf, size_t len)
{
  uint8_t *p = buf;
  size_t got = 0;

  while (got < len) {
    ssize_t n = recv(fd, p + got, len - got, MSG_WAITALL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (n == 0)
      return got == 0 ? -ENODATA : -ECONNRESET;
    got += (size_t)n;
  }
  return 0;
}

int nbd_recv_discard(int fd, uint64_t len)
{
  uint8_t sink[4096];

  while (len > 0) {
    size_t n = len < sizeof sink ? (size_t)len : sizeof sink;
    int r = nbd_recv_full(fd, sink, n);
    if (r < 0)
      return r == -ENODATA ? -ECONNRESET : r;
    len -= n;
  }
  return 0;
}

/* One option reply: header plus the concatenation of `parts`. */
static int send_opt_reply(int fd, uint32_t opt, uint32_t type,
                          const struct iovec *parts, int nparts)
{
  uint8_t hdr[NBD_OPT_REPLY_HDR_SIZE];
  struct iovec iov[4];
  size_t len = 0;
  int i;

  iov[0] = (struct iovec){ hdr, sizeof hdr };
  for (i = 0; i < nparts; i++) {
    iov[i + 1] = parts[i];
    len += parts[i].iov_len;
  }
  nbd_put64(hdr, NBD_REP_MAGIC);
  nbd_put32(hdr + 8, opt);
  nbd_put32(hdr + 12, type);
  nbd_put32(hdr + 16, (uint32_t)len);
  return fc_full_sendmsg(fd, iov, nparts + 1);
}

static int send_ack(int fd, uint32_t opt)
{
  return send_opt_reply(fd, opt, NBD_REP_ACK, NULL, 0);
}

/* Error replies carry a human-readable string that nbdinfo & co print. */
static int send_err(int fd, uint32_t opt, uint32_t type, const char *msg)
{
  struct iovec part = { (void *)msg, strlen(msg) };
  return send_opt_reply(fd, opt, type, &part, 1);
}

static bool name_matches(const struct fc_export *exp, const uint8_t *name,
                         uint32_t len)
{
  size_t n = strlen(exp->name);
  uint8_t diff = 0;

  if (len == 0)
    return !exp->secret_name;
  if (len != n)
    return false;
  /* In constant time: a secret name must not be guessable byte by byte
   * from how long a refusal takes. */
  for (size_t i = 0; i < n; i++)
    diff |= (uint8_t)(name[i] ^ (uint8_t)exp->name[i]);
  return diff == 0;
}

static int do_export_name(int fd, const struct fc_export *exp,
                          const uint8_t *name, uint32_t len, bool no_zeroes)
{
  static const uint8_t zeroes[NBD_EXPORT_NAME_PAD];
  uint8_t buf[10];
  struct iovec iov[2] = { { buf, sizeof buf }, { (void *)zeroes, sizeof zeroes } };
  int r;

  /* EXPORT_NAME has no way to report an error: the spec says close. */
  if (!name_matches(exp, name, len)) {
    log_info("nbd: client asked for unknown export (EXPORT_NAME)");
    return -ENOENT;
  }
  nbd_put64(buf, fc_export_size(exp));
  nbd_put16(buf + 8, nbd_export_tflags(exp));
  r = fc_full_sendmsg(fd, iov, no_zeroes ? 1 : 2);
  return r < 0 ? r : 1;
}

static int do_list(int fd, const struct fc_export *exp, uint32_t len)
{
  uint8_t namelen[4];
  struct iovec parts[3];
  int n = 0, r;

  if (len != 0)
    return send_err(fd, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
                    "NBD_OPT_LIST takes no data");
  /* An empty list: whoever may open a secret export already knows it. */
  if (exp->secret_name)
    return send_ack(fd, NBD_OPT_LIST);
  nbd_put32(namelen, (uint32_t)strlen(exp->name));
  parts[n++] = (struct iovec){ namelen, sizeof namelen };
  parts[n++] = (struct iovec){ (void *)exp->name, strlen(exp->name) };
  /* Whatever follows the name is free-form text for humans. */
  if (exp->description)
    parts[n++] = (struct iovec){ (void *)exp->description,
                                 strlen(exp->description) };
  r = send_opt_reply(fd, NBD_OPT_LIST, NBD_REP_SERVER, parts, n);
  return r < 0 ? r : send_ack(fd, NBD_OPT_LIST);
}

static int send_info_string(int fd, uint32_t opt, uint16_t info,
                            const char *s)
{
  uint8_t type[2];
  struct iovec parts[2] = { { type, sizeof type }, { (void *)s, strlen(s) } };

  nbd_put16(type, info);
  return send_opt_reply(fd, opt, NBD_REP_INFO, parts, 2);
}

/* INFO and GO share a format: u32 name length, name, u16 count, u16[]. */
static int do_info(int fd, const struct fc_export *exp, uint32_t opt,
                   const uint8_t *data, uint32_t len)
{
  uint8_t ex[12], bs[14];
  struct iovec part;
  bool want_name = false, want_desc = false;
  uint32_t namelen, nreq, i;
  int r;

  if (len < 6)
    goto invalid;
  namelen = nbd_get32(data);
  if (namelen > len - 6)
    goto invalid;
  nreq = nbd_get16(data + 4 + namelen);
  if ((uint64_t)len != 4u + namelen + 2u + 2u * (uint64_t)nreq)
    goto invalid;
  if (!name_matches(exp, data + 4, namelen))
    return send_err(fd, opt, NBD_REP_ERR_UNKNOWN, "no such export");
  for (i = 0; i < nreq; i++) {
    uint16_t t = nbd_get16(data + 6 + namelen + 2 * i);
    want_name |= t == NBD_INFO_NAME;
    want_desc |= t == NBD_INFO_DESCRIPTION;
  }

  nbd_put16(ex, NBD_INFO_EXPORT);
  nbd_put64(ex + 2, fc_export_size(exp));
  nbd_put16(ex + 10, nbd_export_tflags(exp));
  part = (struct iovec){ ex, sizeof ex };
  if ((r = send_opt_reply(fd, opt, NBD_REP_INFO, &part, 1)) < 0)
    return r;
  /* Sent unasked too: clients that never ask still learn our limits, and
   * the ones that do ask have thereby promised to honour them. */
  nbd_put16(bs, NBD_INFO_BLOCK_SIZE);
  nbd_put32(bs + 2, exp->min_block);
  nbd_put32(bs + 6, exp->pref_block);
  nbd_put32(bs + 10, exp->max_block);
  part = (struct iovec){ bs, sizeof bs };
  if ((r = send_opt_reply(fd, opt, NBD_REP_INFO, &part, 1)) < 0)
    return r;
  if (want_name &&
      (r = send_info_string(fd, opt, NBD_INFO_NAME, exp->name)) < 0)
    return r;
  if (want_desc && exp->description &&
      (r = send_info_string(fd, opt, NBD_INFO_DESCRIPTION,
                            exp->description)) < 0)
    return r;
  if ((r = send_ack(fd, opt)) < 0)
    return r;
  return opt == NBD_OPT_GO ? 1 : 0;
invalid:
  return send_err(fd, opt, NBD_REP_ERR_INVALID, "malformed INFO/GO request");
}

static int do_structured_reply(int fd, uint32_t len, struct nbd_session *s)
{
  if (len != 0)
    return send_err(fd, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ERR_INVALID,
                    "NBD_OPT_STRUCTURED_REPLY takes no data");
  s->structured = true;
  return send_ack(fd, NBD_OPT_STRUCTURED_REPLY);
}

/* LIST_META_CONTEXT and SET_META_CONTEXT: one NBD_REP_META_CONTEXT for
 * base:allocation if a query matched it, then an ACK. */
static int do_meta_context(int fd, const struct fc_export *exp, uint32_t opt,
                           const uint8_t *data, uint32_t len,
                           struct nbd_session *s)
{
  static const char ctx[] = NBD_META_BASE_ALLOCATION;
  bool set = opt == NBD_OPT_SET_META_CONTEXT;
  struct nbd_meta_request m;
  uint8_t id[4];
  struct iovec parts[2] = { { id, sizeof id }, { (void *)ctx, sizeof ctx - 1 } };
  int r;

  /* A failed SET leaves nothing selected: the client cannot tell which
   * of its earlier choices would still hold. */
  if (set)
    s->base_allocation = false;
  if (!exp->ops->block_status)
    return send_err(fd, opt, NBD_REP_ERR_UNSUP,
                    "this export has no metadata contexts");
  /* The spec ties contexts to structured replies: without them there is
   * no way to send a block-status reply. */
  if (!s->structured)
    return send_err(fd, opt, NBD_REP_ERR_INVALID,
                    "negotiate NBD_OPT_STRUCTURED_REPLY first");
  r = nbd_meta_parse(data, len, set, &m);
  if (r == -E2BIG)
    return send_err(fd, opt, NBD_REP_ERR_TOO_BIG, "query string too long");
  if (r < 0)
    return send_err(fd, opt, NBD_REP_ERR_INVALID,
                    "malformed metadata context request");
  if (!name_matches(exp, m.name, m.namelen))
    return send_err(fd, opt, NBD_REP_ERR_UNKNOWN, "no such export");
  if (m.base_allocation) {
    /* LIST's ids mean nothing (spec: the client must ignore them). */
    nbd_put32(id, set ? NBD_META_ID_BASE_ALLOCATION : 0);
    if ((r = send_opt_reply(fd, opt, NBD_REP_META_CONTEXT, parts, 2)) < 0)
      return r;
  }
  if (set)
    s->base_allocation = m.base_allocation;
  return send_ack(fd, opt);
}

/* Handle one option whose payload has been read.  1 = transmission,
 * 0 = keep haggling, 2 = client aborted, <0 = drop the connection. */
static int do_option(int fd, const struct fc_export *exp, uint32_t opt,
                     const uint8_t *data, uint32_t len, bool no_zeroes,
                     struct nbd_session *s)
{
  switch (opt) {
  case NBD_OPT_EXPORT_NAME:
    return do_export_name(fd, exp, data, len, no_zeroes);
  case NBD_OPT_ABORT:
    /* The client may already have gone; a failed ACK changes nothing. */
    (void)send_ack(fd, opt);
    return 2;
  case NBD_OPT_LIST:
    return do_list(fd, exp, len);
  case NBD_OPT_INFO:
  case NBD_OPT_GO:
    return do_info(fd, exp, opt, data, len);
  case NBD_OPT_STRUCTURED_REPLY:
    return do_structured_reply(fd, len, s);
  case NBD_OPT_LIST_META_CONTEXT:
  case NBD_OPT_SET_META_CONTEXT:
    return do_meta_context(fd, exp, opt, data, len, s);
  default:
    return send_err(fd, opt, NBD_REP_ERR_UNSUP, "option not supported");
  }
}

int nbd_handshake(int fd, const struct fc_export *exp,
                  struct nbd_session *sess)
{
  uint8_t greet[18], hdr[NBD_OPT_HDR_SIZE], cflags[4];
  uint8_t data[NBD_HS_OPT_MAX];
  struct iovec iov = { greet, sizeof greet };
  bool no_zeroes;
  unsigned nopts;
  int r;

  *sess = (struct nbd_session){ 0 };
  nbd_put64(greet, NBD_INIT_MAGIC);
  nbd_put64(greet + 8, NBD_OPTS_MAGIC);
  nbd_put16(greet + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
  if ((r = fc_full_sendmsg(fd, &iov, 1)) < 0)
    return r;
  if ((r = nbd_recv_full(fd, cflags, sizeof cflags)) < 0)
    return r == -ENODATA ? 0 : r;
  /* Spec: the server MUST drop a client that sets unknown flags. */
  if (nbd_get32(cflags) & ~(uint32_t)NBD_FLAG_C_KNOWN) {
    log_info("nbd: client sent unknown handshake flags 0x%x",
             nbd_get32(cflags));
    return -EPROTO;
  }
  /* A client without C_FIXED_NEWSTYLE gets fixed-newstyle replies anyway
   * (the spec allows it): such a client only sends EXPORT_NAME, which
   * behaves identically in both dialects. */
  no_zeroes = nbd_get32(cflags) & NBD_FLAG_C_NO_ZEROES;

  for (nopts = 0; nopts < NBD_HS_MAX_OPTIONS; nopts++) {
    uint32_t opt, len;

    if ((r = nbd_recv_full(fd, hdr, sizeof hdr)) < 0)
      return r == -ENODATA ? 0 : r;
    if (nbd_get64(hdr) != NBD_OPTS_MAGIC) {
      log_info("nbd: bad option magic during handshake");
      return -EPROTO;
    }
    opt = nbd_get32(hdr + 8);
    len = nbd_get32(hdr + 12);
    if (len > NBD_HS_OPT_MAX) {
      /* Nothing we support is this big: skip it if that is cheap, so a
       * curious client gets an answer instead of a dropped socket. */
      if (len > NBD_HS_DRAIN_MAX || opt == NBD_OPT_EXPORT_NAME) {
        log_info("nbd: option %u with %u-byte payload, disconnecting",
                 opt, len);
        return -EMSGSIZE;
      }
      if ((r = nbd_recv_discard(fd, len)) < 0)
        return r;
      if (opt == NBD_OPT_SET_META_CONTEXT)
        sess->base_allocation = false;     /* as any failed SET */
      if (opt == NBD_OPT_ABORT) {
        (void)send_ack(fd, opt);
        return 0;
      }
      r = send_err(fd, opt, NBD_REP_ERR_TOO_BIG, "option data too large");
      if (r < 0)
        return r;
      continue;
    }
    if ((r = nbd_recv_full(fd, data, len)) < 0)
      return r == -ENODATA ? -ECONNRESET : r;
    log_debug("nbd: option %u, %u bytes", opt, len);
    r = do_option(fd, exp, opt, data, len, no_zeroes, sess);
    if (r == 2)
      return 0;
    if (r != 0)
      return r;
  }
  log_info("nbd: client sent more than %u options, disconnecting",
           NBD_HS_MAX_OPTIONS);
  return -ELOOP;
}
