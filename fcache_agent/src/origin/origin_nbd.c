/* SPDX-License-Identifier: Apache-2.0 */
/* Origin on an NBD server (shared storage), through libnbd's asynchronous
 * API.
 *
 * Each of `connections` connections carries many requests at once and has
 * one thread that reads its replies (origin_nbd_conn.c); a request is
 * started from the caller's thread and waits for its own completion
 * (origin_nbd_cmd.c).  See "The origin client" in doc/contributor/design.rst.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nbd_uri.h"
#include "origin_nbd_priv.h"

static struct nbd_origin *
no(struct fc_origin *o)
{
  return (struct nbd_origin *)o;
}

static int
nbdo_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  return nbdo_run(no(o), NBD_OP_READ, buf, count, off, 0);
}

static int
nbdo_pread_async(struct fc_origin *o, void *buf, uint32_t count, uint64_t off,
                 fc_origin_done_fn *done, void *ctx)
{
  return nbdo_read_async(no(o), buf, count, off, done, ctx);
}

/* A flush, and the redo log's changes it covers dropped.  With several
 * connections the server promised (multi-conn) that a flush on any of
 * them covers what the others acknowledged. */
static int
flush_redo(struct nbd_origin *n)
{
  uint64_t mark = nbd_redo_mark(&n->redo);
  int r = nbdo_run(n, NBD_OP_FLUSH, NULL, 0, 0, 0);

  if (!r)
    nbd_redo_flushed(&n->redo, mark);
  return r;
}

/* How a change is kept in the redo log. */
static enum nbd_redo_op
redo_op(enum nbd_cmd_op op, uint32_t flags)
{
  if (op == NBD_OP_WRITE)
    return NBD_REDO_WRITE;
  if (op == NBD_OP_TRIM)
    return NBD_REDO_TRIM;
  return flags & LIBNBD_CMD_FLAG_NO_HOLE ? NBD_REDO_ZERO_NO_HOLE
                                         : NBD_REDO_ZERO;
}

/* A write, trim or zero, kept in the redo log until a flush covers it. */
static int
change(struct nbd_origin *n, enum nbd_cmd_op op, const void *buf,
       uint32_t count, uint64_t off, uint32_t flags)
{
  bool half = false;
  int r;

  if (!n->can_flush)            /* nothing volatile the server admits to */
    return nbdo_run(n, op, (void *)buf, count, off, flags);
  if (!nbd_redo_has_room(&n->redo, count)) {
    /* Before the change is started, so that a failed flush fails it with
     * nothing done; one writer flushes, the others find room after. */
    pthread_mutex_lock(&n->redo.room);
    r = nbd_redo_has_room(&n->redo, count) ? 0 : flush_redo(n);
    pthread_mutex_unlock(&n->redo.room);
    if (r)
      return r;
  }
  nbd_redo_begin(&n->redo);
  /* libnbd only reads from a write's buffer. */
  r = nbdo_run(n, op, (void *)buf, count, off, flags);
  if (!r) {
    r = nbd_redo_record(&n->redo, redo_op(op, flags),
                        op == NBD_OP_WRITE ? buf : NULL, count, off);
    half = r > 0;
    if (half)
      r = 0;
  }
  nbd_redo_end(&n->redo);
  /* Past half the bound, one writer flushes while the others go on.  Its
   * own change is done and kept: a failed flush costs nothing but the
   * room, which the next one makes. */
  if (half && pthread_mutex_trylock(&n->redo.room) == 0) {
    if (nbd_redo_half_full(&n->redo))
      (void)flush_redo(n);
    pthread_mutex_unlock(&n->redo.room);
  }
  return r;
}

static int
nbdo_pwrite(struct fc_origin *o, const void *buf, uint32_t count,
            uint64_t off, bool fua)
{
  struct nbd_origin *n = no(o);
  uint32_t flags = fua && n->can_fua ? LIBNBD_CMD_FLAG_FUA : 0;
  int r;

  r = change(n, NBD_OP_WRITE, buf, count, off, flags);
  /* A server without FUA still has FLUSH: durability must not depend on
   * which one it offers. */
  if (!r && fua && !n->can_fua && n->can_flush)
    r = flush_redo(n);
  return r;
}

static int
nbdo_flush(struct fc_origin *o)
{
  struct nbd_origin *n = no(o);

  return n->can_flush ? flush_redo(n) : 0;
}

static int
nbdo_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  return change(no(o), NBD_OP_TRIM, NULL, count, off, 0);
}

/* NBD_CMD_WRITE_ZEROES: the server keeps the range sparse if it can
 * (nbdkit's file plugin punches a hole) unless it must stay allocated. */
static int
nbdo_zero(struct fc_origin *o, uint32_t count, uint64_t off, bool may_trim)
{
  struct nbd_origin *n = no(o);

  if (!n->can_zero)
    return -EOPNOTSUPP;
  return change(n, NBD_OP_ZERO, NULL, count, off,
                may_trim ? 0 : LIBNBD_CMD_FLAG_NO_HOLE);
}

static int
nbdo_block_status(struct fc_origin *o, uint32_t count, uint64_t off,
                  struct fc_origin_extent *ext, uint32_t max)
{
  struct nbd_origin *n = no(o);
  struct nbd_extents x = { .ext = ext, .max = max, .off = off,
                           .end = off + count };
  int r;

  if (!n->can_block_status)
    return fc_origin_block_status_unknown(count, ext);
  r = nbdo_run(n, NBD_OP_BLOCK_STATUS, &x, count, off,
               max == 1 ? LIBNBD_CMD_FLAG_REQ_ONE : 0);
  if (r)
    return r;
  /* A server that answered without base:allocation: it no longer has it
   * (a reconnection to another server); the caller must not guess. */
  return x.n ? (int)x.n : -EIO;
}

/* A storage move gives its target up: every connection's loop ends, which
 * fails what is in flight at once instead of after the stall limit, and
 * every later request fails with ENOTCONN (no connection is live). */
static void
nbdo_cancel(struct fc_origin *o)
{
  struct nbd_origin *n = no(o);

  for (unsigned i = 0; i < n->nr_conns; i++)
    nbd_conn_cancel(&n->conns[i]);
}

static void
nbdo_close(struct fc_origin *o)
{
  struct nbd_origin *n = no(o);

  for (unsigned i = 0; i < n->nr_conns; i++)
    nbd_conn_stop(&n->conns[i]);
  pthread_cond_destroy(&n->slot_cond);
  pthread_mutex_destroy(&n->slot_lock);
  if (n->redo_ready)
    nbd_redo_destroy(&n->redo);
  free(n->uri);
  free(n->tls_dir);
  free(n->tls_psk_file);
  free(n);
}

static const struct fc_origin_ops nbd_ops = {
  .pread = nbdo_pread,
  .pread_async = nbdo_pread_async,
  .pwrite = nbdo_pwrite,
  .flush = nbdo_flush,
  .trim = nbdo_trim,
  .zero = nbdo_zero,
  .block_status = nbdo_block_status,
  .cancel = nbdo_cancel,
  .close = nbdo_close,
};

/* Learn the export from the first connection. */
static int
describe(struct nbd_origin *n, struct nbd_handle *h, char *err, size_t errlen)
{
  int64_t size = nbd_get_size(h), max;

  if (size <= 0) {
    snprintf(err, errlen, "origin %s reports no usable size", n->uri);
    return -EINVAL;
  }
  n->base.size = (uint64_t)size;
  n->base.can_trim = nbd_can_trim(h) > 0;
  n->can_fua = nbd_can_fua(h) > 0;
  n->can_flush = nbd_can_flush(h) > 0;
  n->can_zero = nbd_can_zero(h) > 0;
  n->can_block_status =
    nbd_can_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) > 0;
  max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
  n->max_request = max > 0 && max < (32 << 20) ? (uint32_t)max : (32 << 20);
  return 0;
}

int
fc_origin_open_nbd(const char *uri, unsigned connections,
                   const struct fc_origin_policy *pol,
                   struct fc_origin **out, char *err, size_t errlen)
{
  struct nbd_origin *n;
  struct nbd_handle *h = NULL;
  int r;

  if (pol) {
    struct fc_nbd_uri u;

    if (fc_nbd_uri_parse(uri, &u)) {
      snprintf(err, errlen, "origin %.300s is not an NBD URI the agent can "
               "judge (nbd+unix:///EXPORT?socket=PATH, "
               "nbd://HOST[:PORT]/EXPORT, or their nbds variants)", uri);
      return -EINVAL;
    }
    if (u.is_unix) {
      char why[512];

      r = fc_origin_policy_check_socket(pol, u.socket, why, sizeof why);
      if (r) {
        snprintf(err, errlen, "origin %.300s: %s", uri, why);
        return r;
      }
    }
  }
  if (connections == 0)
    connections = 1;
  if (connections > NBD_ORIGIN_MAX_CONNS)
    connections = NBD_ORIGIN_MAX_CONNS;
  n = calloc(1, sizeof *n);
  if (!n)
    return -ENOMEM;
  n->uri = strdup(uri);
  snprintf(n->volume, sizeof n->volume, "%s", pol && pol->volume_id ? pol->volume_id : "-");
  n->stall_ms = pol && pol->stall_ms ? pol->stall_ms : NBD_CONN_STALL_DEFAULT_MS;
  n->tls_dir = pol && pol->tls_dir ? strdup(pol->tls_dir) : NULL;
  n->tls_psk_file = pol && pol->tls_psk_file ? strdup(pol->tls_psk_file) : NULL;
  if (!n->uri || (pol && pol->tls_dir && !n->tls_dir) ||
      (pol && pol->tls_psk_file && !n->tls_psk_file)) {
    free(n->uri);
    free(n->tls_dir);
    free(n->tls_psk_file);
    free(n);
    return -ENOMEM;
  }
  pthread_mutex_init(&n->slot_lock, NULL);
  pthread_cond_init(&n->slot_cond, NULL);
  n->base.ops = &nbd_ops;
  r = nbd_redo_init(&n->redo);
  if (r) {
    snprintf(err, errlen, "origin %s: %s", uri, strerror(-r));
    goto out;
  }
  n->redo_ready = true;

  r = nbd_conn_connect(n, &h, err, errlen);
  if (r)
    goto out;
  r = describe(n, h, err, errlen);
  if (r)
    goto out;
  /* Several connections are only safe when the server promises that a
   * flush on one covers writes made on the others. */
  if (connections > 1 && nbd_can_multi_conn(h) <= 0)
    connections = 1;
  for (unsigned i = 0; i < connections; i++) {
    if (!h) {
      r = nbd_conn_connect(n, &h, err, errlen);
      if (r)
        goto out;
    }
    r = nbd_conn_start(&n->conns[i], n, i, h);
    if (r) {
      snprintf(err, errlen, "origin %s: cannot start connection %u: %s",
               uri, i, strerror(-r));
      goto out;
    }
    h = NULL;                   /* the connection owns it now */
    n->nr_conns = i + 1;
  }
  *out = &n->base;
  return 0;

out:
  if (h)
    nbd_close(h);
  nbdo_close(&n->base);
  return r;
}
