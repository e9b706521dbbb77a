/* Origin on an NBD server (shared storage), through libnbd.
 *
 * A libnbd handle serialises its callers, so one handle would turn the
 * VM's queue depth into one request at a time at the storage server.  We
 * keep a small pool of connections and hand each request a free one.
 */
#include <errno.h>
#include <libnbd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "origin.h"

#define NBD_ORIGIN_MAX_CONNS 32

struct nbd_origin {
  struct fc_origin base;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned nr_handles;
  unsigned nr_idle;
  struct nbd_handle *idle[NBD_ORIGIN_MAX_CONNS];
  struct nbd_handle *all[NBD_ORIGIN_MAX_CONNS];
  bool can_fua;
  uint32_t max_request;
};

static struct nbd_origin *
no(struct fc_origin *o)
{
  return (struct nbd_origin *)o;
}

static struct nbd_handle *
take(struct nbd_origin *n)
{
  struct nbd_handle *h;

  pthread_mutex_lock(&n->lock);
  while (n->nr_idle == 0)
    pthread_cond_wait(&n->cond, &n->lock);
  h = n->idle[--n->nr_idle];
  pthread_mutex_unlock(&n->lock);
  return h;
}

static void
give_back(struct nbd_origin *n, struct nbd_handle *h)
{
  pthread_mutex_lock(&n->lock);
  n->idle[n->nr_idle++] = h;
  pthread_cond_signal(&n->cond);
  pthread_mutex_unlock(&n->lock);
}

static int
nbd_err(void)
{
  int e = nbd_get_errno();

  return e > 0 ? -e : -EIO;
}

static int
nbdo_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  struct nbd_origin *n = no(o);
  struct nbd_handle *h = take(n);
  int r = 0;

  while (count && !r) {
    uint32_t len = count < n->max_request ? count : n->max_request;
    if (nbd_pread(h, buf, len, off, 0) == -1)
      r = nbd_err();
    buf = (char *)buf + len;
    off += len;
    count -= len;
  }
  give_back(n, h);
  return r;
}

static int
nbdo_pwrite(struct fc_origin *o, const void *buf, uint32_t count,
            uint64_t off, bool fua)
{
  struct nbd_origin *n = no(o);
  struct nbd_handle *h = take(n);
  uint32_t flags = fua && n->can_fua ? LIBNBD_CMD_FLAG_FUA : 0;
  int r = 0;

  while (count && !r) {
    uint32_t len = count < n->max_request ? count : n->max_request;
    if (nbd_pwrite(h, buf, len, off, flags) == -1)
      r = nbd_err();
    buf = (const char *)buf + len;
    off += len;
    count -= len;
  }
  /* A server without FUA still has FLUSH: durability must not depend on
   * which one it offers. */
  if (!r && fua && !n->can_fua && nbd_flush(h, 0) == -1)
    r = nbd_err();
  give_back(n, h);
  return r;
}

static int
nbdo_flush(struct fc_origin *o)
{
  struct nbd_origin *n = no(o);
  struct nbd_handle *h = take(n);
  int r = 0;

  if (nbd_can_flush(h) > 0 && nbd_flush(h, 0) == -1)
    r = nbd_err();
  give_back(n, h);
  return r;
}

static int
nbdo_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  struct nbd_origin *n = no(o);
  struct nbd_handle *h = take(n);
  int r = 0;

  if (nbd_trim(h, count, off, 0) == -1)
    r = nbd_err();
  give_back(n, h);
  return r;
}

static void
nbdo_close(struct fc_origin *o)
{
  struct nbd_origin *n = no(o);

  for (unsigned i = 0; i < n->nr_handles; i++) {
    nbd_shutdown(n->all[i], 0);
    nbd_close(n->all[i]);
  }
  pthread_cond_destroy(&n->cond);
  pthread_mutex_destroy(&n->lock);
  free(n);
}

static const struct fc_origin_ops nbd_ops = {
  .pread = nbdo_pread,
  .pwrite = nbdo_pwrite,
  .flush = nbdo_flush,
  .trim = nbdo_trim,
  .close = nbdo_close,
};

static int
connect_one(const char *uri, struct nbd_handle **out, char *err, size_t errlen)
{
  struct nbd_handle *h = nbd_create();
  int r;

  if (!h) {
    snprintf(err, errlen, "libnbd: %s", nbd_get_error());
    return nbd_err();
  }
  /* The URI comes from the control plane; never let it make libnbd read
   * local files (tls-psk-file=...) or spawn anything. */
  if (nbd_set_uri_allow_local_file(h, false) == -1 ||
      nbd_set_uri_allow_transports(h, LIBNBD_ALLOW_TRANSPORT_TCP |
                                      LIBNBD_ALLOW_TRANSPORT_UNIX) == -1 ||
      nbd_connect_uri(h, uri) == -1) {
    r = nbd_err();
    snprintf(err, errlen, "cannot connect to origin %s: %s", uri, nbd_get_error());
    nbd_close(h);
    return r;
  }
  *out = h;
  return 0;
}

int
fc_origin_open_nbd(const char *uri, unsigned connections,
                   struct fc_origin **out, char *err, size_t errlen)
{
  struct nbd_origin *n;
  int64_t size, max;
  int r;

  if (connections == 0)
    connections = 1;
  if (connections > NBD_ORIGIN_MAX_CONNS)
    connections = NBD_ORIGIN_MAX_CONNS;
  n = calloc(1, sizeof *n);
  if (!n)
    return -ENOMEM;
  pthread_mutex_init(&n->lock, NULL);
  pthread_cond_init(&n->cond, NULL);
  n->base.ops = &nbd_ops;

  r = connect_one(uri, &n->all[0], err, errlen);
  if (r)
    goto out;
  n->nr_handles = 1;
  size = nbd_get_size(n->all[0]);
  if (size <= 0) {
    r = size < 0 ? nbd_err() : -EINVAL;
    snprintf(err, errlen, "origin %s reports no usable size", uri);
    goto out;
  }
  n->base.size = (uint64_t)size;
  n->base.can_trim = nbd_can_trim(n->all[0]) > 0;
  n->can_fua = nbd_can_fua(n->all[0]) > 0;
  max = nbd_get_block_size(n->all[0], LIBNBD_SIZE_MAXIMUM);
  n->max_request = max > 0 && max < (32 << 20) ? (uint32_t)max : (32 << 20);

  /* Several connections are only safe when the server promises that a
   * flush on one covers writes made on the others. */
  if (connections > 1 && nbd_can_multi_conn(n->all[0]) <= 0)
    connections = 1;
  for (; n->nr_handles < connections; n->nr_handles++) {
    r = connect_one(uri, &n->all[n->nr_handles], err, errlen);
    if (r)
      goto out;
  }
  for (unsigned i = 0; i < n->nr_handles; i++)
    n->idle[i] = n->all[i];
  n->nr_idle = n->nr_handles;
  *out = &n->base;
  return 0;

out:
  nbdo_close(&n->base);
  return r;
}
