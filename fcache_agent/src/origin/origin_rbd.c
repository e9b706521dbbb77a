/* SPDX-License-Identifier: Apache-2.0 */
/* Origin on a Ceph RBD image, through librbd.
 *
 * librbd's own cache is off (rbd_cache = false): the agent is the cache,
 * and a write librbd acknowledges is then on the OSDs, so that FLUSH and
 * FUA keep their meaning without a second layer of volatile data.
 *
 * The image's exclusive lock.  librbd normally hands the lock to whichever
 * client asks for it; a cache must not allow that: another writer would
 * make the cached blocks stale, and after a live migration a source that
 * wrote a late block would take the lock back from the destination.  So
 * the agent takes the lock explicitly (librbd then refuses it to others)
 * with its first write, keeps it until the volume is detached, and gives
 * it up only when a live migration's source freezes the volume for the
 * switchover (fc_origin_release); the destination takes it with its own
 * first write.  An image without the exclusive-lock feature has no lock
 * to take, as for QEMU.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <rados/librados.h>
#include <rbd/features.h>
#include <rbd/librbd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/rbd_spec.h"
#include "origin.h"

/* How long the first write after a switchover waits for the source to
 * give the lock up: the switchover orders the two, so this only covers
 * the source's release still being on its way to the cluster. */
#define LOCK_WAIT_MS 10000
#define LOCK_RETRY_MS 50
/* Seconds librados waits for the monitors to authenticate (the connect's
 * deadline) and for any one monitor or OSD request: past them a request
 * fails (the guest sees EIO) instead of hanging the volume for good. */
#define MOUNT_TIMEOUT_S "10"
#define OP_TIMEOUT_S "30"

struct rbd_req;

struct rbd_origin {
  struct fc_origin base;
  rados_t cluster;
  rados_ioctx_t io;
  rbd_image_t image;
  bool lockable;                /* the image has the exclusive-lock feature */
  bool fast_diff;               /* object map + fast-diff: cheap block status */
  pthread_mutex_t lock_mu;      /* one taker or giver of the lock at a time */
  atomic_bool owner;            /* we hold the exclusive lock */
  /* Callers waiting for librbd (run()), and whether they were told to
   * stop waiting (fc_origin_cancel). */
  pthread_mutex_t req_mu;
  struct rbd_req *waiting;
  bool cancelled;
  char name[3 * FC_RBD_NAME_MAX];
  char volume[80];              /* for log lines; "-": none */
};

static struct rbd_origin *
ro(struct fc_origin *o)
{
  return (struct rbd_origin *)o;
}

/* What librbd says, as the block layer above understands it: an error the
 * caller can act on stays; anything about the cluster (timeouts, a lock
 * another client holds, this client blocklisted) is an I/O error. */
static int
io_error(struct rbd_origin *r, const char *op, long rc)
{
  if (rc == -ENOMEM || rc == -ENOSPC || rc == -EINVAL || rc == -EDQUOT)
    return (int)rc;
  log_warning("volume %s: rbd origin %s: %s failed: %s", r->volume, r->name, op,
              strerror((int)-rc));
  return -EIO;
}

static void
sleep_ms(unsigned ms)
{
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

  nanosleep(&ts, NULL);
}

/* Before any change to the image: hold its exclusive lock. */
static int
own(struct rbd_origin *r)
{
  unsigned waited = 0;
  int rc = 0;

  if (!r->lockable || atomic_load(&r->owner))
    return 0;
  pthread_mutex_lock(&r->lock_mu);
  while (!atomic_load(&r->owner)) {
    rc = rbd_lock_acquire(r->image, RBD_LOCK_MODE_EXCLUSIVE);
    if (rc == 0) {
      atomic_store(&r->owner, true);
      break;
    }
    /* Refused: another client holds it (the source of a migration still
     * giving it up).  Anything else will not get better by waiting. */
    if ((rc != -EROFS && rc != -EBUSY && rc != -EAGAIN) ||
        waited >= LOCK_WAIT_MS)
      break;
    sleep_ms(LOCK_RETRY_MS);
    waited += LOCK_RETRY_MS;
  }
  pthread_mutex_unlock(&r->lock_mu);
  if (rc < 0)
    log_warning("volume %s: rbd origin %s: cannot take the image's exclusive "
                "lock (%s): another client holds it; the write fails", r->volume,
                r->name, strerror(-rc));
  return rc < 0 ? -EIO : 0;
}

static int
rbd_origin_release(struct fc_origin *o)
{
  struct rbd_origin *r = ro(o);
  int rc = 0;

  pthread_mutex_lock(&r->lock_mu);
  if (atomic_load(&r->owner)) {
    rc = rbd_lock_release(r->image);
    if (rc == 0)
      atomic_store(&r->owner, false);
  }
  pthread_mutex_unlock(&r->lock_mu);
  return rc < 0 ? io_error(r, "releasing the exclusive lock", rc) : 0;
}

/* librbd refreshes the image header when the cluster tells it another
 * client changed it: Cinder's extend (which, while we hold the exclusive
 * lock, librbd carries out here on Cinder's behalf). */
static int
rbd_origin_size_now(struct fc_origin *o, uint64_t *size)
{
  int rc = rbd_get_size(ro(o)->image, size);

  return rc < 0 ? io_error(ro(o), "reading the image's size", rc) : 0;
}

/* One synchronous request, made as librbd's asynchronous one so that the
 * caller can stop waiting: a storage move giving its target up
 * (fc_origin_cancel) must not wait for OSDs that stopped answering
 * (librados' op timeout).  The request works on a copy of the caller's
 * data, which stays librbd's until its completion, whoever still waits. */
enum rbd_op { RBD_READ, RBD_WRITE, RBD_DISCARD, RBD_ZERO, RBD_FLUSH };

struct rbd_req {
  struct rbd_origin *r;
  struct rbd_req *next, *prev;  /* r->waiting, under r->req_mu */
  pthread_cond_t cv;
  bool done;
  bool abandoned;               /* the caller left: the completion frees it */
  ssize_t ret;
  char *copy;
};

static void
unlink_req(struct rbd_req *q)
{
  if (q->prev)
    q->prev->next = q->next;
  else
    q->r->waiting = q->next;
  if (q->next)
    q->next->prev = q->prev;
}

static void
free_req(struct rbd_req *q)
{
  pthread_cond_destroy(&q->cv);
  free(q->copy);
  free(q);
}

static void
req_done(rbd_completion_t c, void *arg)
{
  struct rbd_req *q = arg;
  struct rbd_origin *r = q->r;
  ssize_t ret = rbd_aio_get_return_value(c);
  bool abandoned;

  rbd_aio_release(c);
  pthread_mutex_lock(&r->req_mu);
  abandoned = q->abandoned;
  q->ret = ret;
  q->done = true;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&r->req_mu);
  if (abandoned)
    free_req(q);
}

static int
submit(struct rbd_origin *r, enum rbd_op op, struct rbd_req *q,
       uint32_t count, uint64_t off, int zero_flags, rbd_completion_t c)
{
  switch (op) {
  case RBD_READ:
    return rbd_aio_read2(r->image, off, count, q->copy, c, 0);
  case RBD_WRITE:
    return rbd_aio_write2(r->image, off, count, q->copy, c, 0);
  case RBD_DISCARD:
    return rbd_aio_discard(r->image, off, count, c);
  case RBD_ZERO:
    return rbd_aio_write_zeroes(r->image, off, count, c, zero_flags, 0);
  default:
    return rbd_aio_flush(r->image, c);
  }
}

/* The request's result as librbd gives it (bytes, or -errno); -ECANCELED
 * when the origin was cancelled before it ended. */
static ssize_t
run(struct rbd_origin *r, enum rbd_op op, void *buf, uint32_t count,
    uint64_t off, int zero_flags)
{
  bool has_data = op == RBD_READ || op == RBD_WRITE;
  struct rbd_req *q = calloc(1, sizeof *q);
  rbd_completion_t c;
  ssize_t ret;
  int rc;

  if (!q || (has_data && !(q->copy = malloc(count)))) {
    free(q);
    return -ENOMEM;
  }
  q->r = r;
  pthread_cond_init(&q->cv, NULL);
  if (op == RBD_WRITE)
    memcpy(q->copy, buf, count);
  pthread_mutex_lock(&r->req_mu);
  if (r->cancelled) {
    pthread_mutex_unlock(&r->req_mu);
    free_req(q);
    return -ECANCELED;
  }
  q->next = r->waiting;
  if (q->next)
    q->next->prev = q;
  r->waiting = q;
  pthread_mutex_unlock(&r->req_mu);
  rc = rbd_aio_create_completion(q, req_done, &c);
  if (rc == 0) {
    rc = submit(r, op, q, count, off, zero_flags, c);
    if (rc < 0)
      rbd_aio_release(c);
  }
  pthread_mutex_lock(&r->req_mu);
  while (rc == 0 && !q->done && !r->cancelled)
    pthread_cond_wait(&q->cv, &r->req_mu);
  unlink_req(q);
  if (rc == 0 && !q->done) {
    q->abandoned = true;        /* librbd still has it */
    pthread_mutex_unlock(&r->req_mu);
    return -ECANCELED;
  }
  pthread_mutex_unlock(&r->req_mu);
  ret = rc < 0 ? rc : q->ret;
  if (op == RBD_READ && ret == (ssize_t)count)
    memcpy(buf, q->copy, count);
  free_req(q);
  return ret;
}

static void
rbd_origin_cancel(struct fc_origin *o)
{
  struct rbd_origin *r = ro(o);

  pthread_mutex_lock(&r->req_mu);
  r->cancelled = true;
  for (struct rbd_req *q = r->waiting; q; q = q->next)
    pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&r->req_mu);
}

static int
rbd_origin_pread(struct fc_origin *o, void *buf, uint32_t count, uint64_t off)
{
  ssize_t n = run(ro(o), RBD_READ, buf, count, off, 0);

  if (n == (ssize_t)count)
    return 0;
  return io_error(ro(o), "read", n < 0 ? n : -EIO);
}

struct aio_read {
  fc_origin_done_fn *done;
  void *ctx;
  uint32_t count;
  struct rbd_origin *r;
};

static void
aio_read_done(rbd_completion_t c, void *arg)
{
  struct aio_read *a = arg;
  ssize_t n = rbd_aio_get_return_value(c);
  int err = n == (ssize_t)a->count ? 0 :
            io_error(a->r, "read", n < 0 ? n : -EIO);

  rbd_aio_release(c);
  a->done(a->ctx, err);
  free(a);
}

/* librbd queues every request to its own threads (rbd_non_blocking_aio),
 * so done runs there, never inside this call. */
static int
rbd_origin_pread_async(struct fc_origin *o, void *buf, uint32_t count,
                       uint64_t off, fc_origin_done_fn *done, void *ctx)
{
  struct aio_read *a = malloc(sizeof *a);
  rbd_completion_t c;
  int rc;

  if (!a)
    return -EAGAIN;
  *a = (struct aio_read){ done, ctx, count, ro(o) };
  rc = rbd_aio_create_completion(a, aio_read_done, &c);
  if (rc < 0) {
    free(a);
    return -EAGAIN;
  }
  rc = rbd_aio_read2(ro(o)->image, off, count, buf, c, 0);
  if (rc < 0) {
    rbd_aio_release(c);
    free(a);
    return -EAGAIN;
  }
  return 0;
}

static int
rbd_origin_flush(struct fc_origin *o)
{
  int rc;

  /* Not holding the lock, this client has nothing unflushed (the lock is
   * taken before any change, and giving it up flushes): librbd would
   * only refuse a flush from a non-owner. */
  if (ro(o)->lockable && !atomic_load(&ro(o)->owner))
    return 0;
  rc = (int)run(ro(o), RBD_FLUSH, NULL, 0, 0, 0);
  return rc < 0 ? io_error(ro(o), "flush", rc) : 0;
}

static int
rbd_origin_pwrite(struct fc_origin *o, const void *buf, uint32_t count,
                  uint64_t off, bool fua)
{
  struct rbd_origin *r = ro(o);
  ssize_t n;
  int rc = own(r);

  if (rc < 0)
    return rc;
  /* An asynchronous write's result is 0, not the bytes written. */
  n = run(r, RBD_WRITE, (void *)buf, count, off, 0);
  if (n < 0)
    return io_error(r, "write", n);
  /* Acknowledged by the OSDs already (no librbd cache); the flush is
   * what FUA promises, and costs nothing more here. */
  return fua ? rbd_origin_flush(o) : 0;
}

static int
rbd_origin_trim(struct fc_origin *o, uint32_t count, uint64_t off)
{
  struct rbd_origin *r = ro(o);
  int rc = own(r);

  if (rc < 0)
    return rc;
  rc = (int)run(r, RBD_DISCARD, NULL, count, off, 0);
  return rc < 0 ? io_error(r, "discard", rc) : 0;
}

/* librbd zeroes in place: whole objects are removed (a hole) where the
 * client allows it, otherwise the range is written zeroed and stays
 * allocated (thick). */
static int
rbd_origin_zero(struct fc_origin *o, uint32_t count, uint64_t off,
                bool may_trim)
{
  struct rbd_origin *r = ro(o);
  ssize_t n;
  int rc = own(r);

  if (rc < 0)
    return rc;
  n = run(r, RBD_ZERO, NULL, count, off,
          may_trim ? 0 : RBD_WRITE_ZEROES_FLAG_THICK_PROVISION);
  if (n < 0)
    return io_error(r, "write_zeroes", n);
  return 0;
}

struct extents {
  struct fc_origin_extent *ext;
  uint32_t max, n;
  uint64_t pos, end;
};

static void
add_extent(struct extents *x, uint64_t stop, uint32_t flags)
{
  if (stop <= x->pos || x->n == x->max)
    return;
  if (x->n && x->ext[x->n - 1].flags == flags) {
    x->ext[x->n - 1].length += (uint32_t)(stop - x->pos);
  } else {
    x->ext[x->n++] = (struct fc_origin_extent){
      .length = (uint32_t)(stop - x->pos), .flags = flags };
  }
  x->pos = stop;
}

#define EXTENTS_FULL (-ECANCELED)

/* Called in order for every allocated extent; what lies between them is
 * a hole.  Extents may start before or end after the range asked for
 * (whole objects). */
static int
diff_extent(uint64_t off, size_t len, int exists, void *arg)
{
  struct extents *x = arg;
  uint64_t stop = off + len < x->end ? off + len : x->end;

  add_extent(x, off < x->end ? off : x->end, FC_ORIGIN_HOLE | FC_ORIGIN_ZERO);
  add_extent(x, stop, exists ? 0 : FC_ORIGIN_HOLE | FC_ORIGIN_ZERO);
  return x->n == x->max && x->pos < x->end ? EXTENTS_FULL : 0;
}

/* Block status from librbd's diff against nothing: which objects (with
 * fast-diff, from the object map) or which byte ranges exist. */
static int
rbd_origin_block_status(struct fc_origin *o, uint32_t count, uint64_t off,
                        struct fc_origin_extent *ext, uint32_t max)
{
  struct rbd_origin *r = ro(o);
  struct extents x = { ext, max, 0, off, off + count };
  int rc;

  rc = rbd_diff_iterate2(r->image, NULL, off, count, 1, r->fast_diff,
                         diff_extent, &x);
  if (rc < 0 && rc != EXTENTS_FULL) {
    if (x.n)
      return (int)x.n;
    /* Cannot tell: data, as for a block device. */
    return fc_origin_block_status_unknown(count, ext);
  }
  add_extent(&x, x.end, FC_ORIGIN_HOLE | FC_ORIGIN_ZERO);
  return (int)x.n;
}

/* Closing gives the lock up (after librbd's own flush), and waits for
 * every request librbd still has, abandoned ones included. */
static void *
close_now(void *arg)
{
  struct rbd_origin *r = arg;

  if (r->image)
    rbd_close(r->image);
  if (r->io)
    rados_ioctx_destroy(r->io);
  if (r->cluster)
    rados_shutdown(r->cluster);
  pthread_mutex_destroy(&r->lock_mu);
  pthread_mutex_destroy(&r->req_mu);
  free(r);
  return NULL;
}

/* A cancelled origin is closed on a thread of its own: its abandoned
 * requests may wait for OSDs that stopped, up to librados' op timeout,
 * and whoever gave it up (a storage move's abort) must not. */
static void
rbd_origin_close(struct fc_origin *o)
{
  struct rbd_origin *r = ro(o);
  pthread_t t;
  bool cancelled;

  pthread_mutex_lock(&r->req_mu);
  cancelled = r->cancelled;
  pthread_mutex_unlock(&r->req_mu);
  if (cancelled && pthread_create(&t, NULL, close_now, r) == 0) {
    pthread_detach(t);
    return;
  }
  close_now(r);
}

static const struct fc_origin_ops rbd_ops = {
  .pread = rbd_origin_pread,
  .pread_async = rbd_origin_pread_async,
  .pwrite = rbd_origin_pwrite,
  .flush = rbd_origin_flush,
  .trim = rbd_origin_trim,
  .zero = rbd_origin_zero,
  .block_status = rbd_origin_block_status,
  .release = rbd_origin_release,
  .cancel = rbd_origin_cancel,
  .size_now = rbd_origin_size_now,
  .close = rbd_origin_close,
};

/* A conf file is librados configuration, which can load code (plugin
 * directories) and write files (logs, admin sockets) as the root agent:
 * only root may have written it. */
static int
check_conf_owner(int fd, const char *path, char *err, size_t errlen)
{
  struct stat st;

  if (fstat(fd, &st) < 0)
    return -errno;
  if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    snprintf(err, errlen, "RBD conf %s is not owned by root or is writable "
             "by its group or others; librados configuration runs as the "
             "agent (root): chown root and chmod go-w it", path);
    return -EPERM;
  }
  return 0;
}

static int
conf_set(rados_t c, const char *key, const char *value, char *err,
         size_t errlen)
{
  int rc = rados_conf_set(c, key, value);

  if (rc < 0)
    snprintf(err, errlen, "cannot set librados option %s: %s", key,
             strerror(-rc));
  return rc;
}

/* Everything from the conf file, then what the agent insists on. */
static int
configure(struct rbd_origin *r, const struct fc_rbd_spec *spec, int conf_fd,
          int keyring_fd, const struct fc_origin_policy *pol, char *err,
          size_t errlen)
{
  char fdpath[32];
  int rc;

  if (conf_fd >= 0) {
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", conf_fd);
    rc = rados_conf_read_file(r->cluster, fdpath);
    if (rc < 0) {
      snprintf(err, errlen, "cannot read RBD conf %s: %s", spec->conf,
               strerror(-rc));
      return rc;
    }
  }
  if (keyring_fd >= 0) {
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", keyring_fd);
    rc = conf_set(r->cluster, "keyring", fdpath, err, errlen);
    if (rc < 0)
      return rc;
  }
  if (spec->mon_host[0]) {
    rc = conf_set(r->cluster, "mon_host", spec->mon_host, err, errlen);
    if (rc < 0)
      return rc;
  }
  static const char *const fixed[][2] = {
    { "rbd_cache", "false" },
    /* One agent serves many volumes; no socket per volume in /run/ceph. */
    { "admin_socket", "" },
    { "client_mount_timeout", MOUNT_TIMEOUT_S },
    { "rados_mon_op_timeout", OP_TIMEOUT_S },
    { "rados_osd_op_timeout", OP_TIMEOUT_S },
    /* The agent's stderr is its log; librados's own goes nowhere. */
    { "log_to_stderr", "false" },
    { "err_to_stderr", "false" },
    { "log_file", "" },
  };
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    rc = conf_set(r->cluster, fixed[i][0], fixed[i][1], err, errlen);
    if (rc < 0)
      return rc;
  }
  rc = conf_set(r->cluster, "ms_client_mode", pol->rbd_ms_mode, err, errlen);
  if (rc == 0)
    rc = conf_set(r->cluster, "ms_mon_client_mode", pol->rbd_ms_mode, err,
                  errlen);
  return rc;
}

int
fc_origin_open_rbd(const char *uri, const struct fc_origin_policy *pol,
                   struct fc_origin **out, char *err, size_t errlen)
{
  struct fc_rbd_spec spec;
  struct rbd_origin *r;
  char client[FC_RBD_NAME_MAX + 8];
  int conf_fd = -1, keyring_fd = -1, rc;
  uint64_t features = 0;

  rc = fc_rbd_spec_parse(uri, &spec, err, errlen);
  if (rc < 0)
    return rc;
  r = calloc(1, sizeof *r);
  if (!r)
    return -ENOMEM;
  pthread_mutex_init(&r->lock_mu, NULL);
  pthread_mutex_init(&r->req_mu, NULL);
  snprintf(r->name, sizeof r->name, "%s/%s%s%s", spec.pool, spec.ns,
           spec.ns[0] ? "/" : "", spec.image);
  snprintf(r->volume, sizeof r->volume, "%s", pol && pol->volume_id ? pol->volume_id : "-");
  if (spec.conf[0]) {
    rc = fc_origin_policy_open_rbd_file(pol, "conf", spec.conf, &conf_fd,
                                        err, errlen);
    if (rc == 0)
      rc = check_conf_owner(conf_fd, spec.conf, err, errlen);
    if (rc < 0)
      goto out;
  }
  if (spec.keyring[0]) {
    rc = fc_origin_policy_open_rbd_file(pol, "keyring", spec.keyring,
                                        &keyring_fd, err, errlen);
    if (rc < 0)
      goto out;
  }
  if (!spec.conf[0] && !spec.mon_host[0]) {
    rc = -EINVAL;
    snprintf(err, errlen, "RBD origin %s names neither conf= nor mon_host=: "
             "the agent reads no default Ceph configuration", r->name);
    goto out;
  }
  snprintf(client, sizeof client, "client.%s", spec.id[0] ? spec.id : "admin");
  rc = rados_create2(&r->cluster, "ceph", client, 0);
  if (rc < 0) {
    snprintf(err, errlen, "cannot create a librados client: %s", strerror(-rc));
    r->cluster = NULL;
    goto out;
  }
  rc = configure(r, &spec, conf_fd, keyring_fd, pol, err, errlen);
  if (rc < 0)
    goto out;
  rc = rados_connect(r->cluster);
  if (rc < 0) {
    snprintf(err, errlen, "cannot connect to the Ceph cluster of RBD origin "
             "%s as %s: %s (monitors, key, and origin_rbd_ms_mode = %s)",
             r->name, client, strerror(-rc), pol->rbd_ms_mode);
    goto out;
  }
  rc = rados_ioctx_create(r->cluster, spec.pool, &r->io);
  if (rc < 0) {
    r->io = NULL;
    snprintf(err, errlen, "cannot open pool %s of RBD origin %s: %s",
             spec.pool, r->name, strerror(-rc));
    goto out;
  }
  rados_ioctx_set_namespace(r->io, spec.ns);
  rc = rbd_open(r->io, spec.image, &r->image, NULL);
  if (rc < 0) {
    r->image = NULL;
    snprintf(err, errlen, "cannot open RBD image %s: %s", r->name,
             strerror(-rc));
    goto out;
  }
  rc = rbd_get_size(r->image, &r->base.size);
  if (rc == 0)
    rc = rbd_get_features(r->image, &features);
  if (rc < 0) {
    snprintf(err, errlen, "cannot read RBD image %s: %s", r->name,
             strerror(-rc));
    goto out;
  }
  if (r->base.size == 0) {
    rc = -EINVAL;
    snprintf(err, errlen, "RBD image %s is empty", r->name);
    goto out;
  }
  r->lockable = features & RBD_FEATURE_EXCLUSIVE_LOCK;
  r->fast_diff = features & RBD_FEATURE_FAST_DIFF;
  r->base.ops = &rbd_ops;
  r->base.can_trim = true;
  *out = &r->base;
  r = NULL;
out:
  /* librados has read both files (the keyring at connect). */
  if (conf_fd >= 0)
    close(conf_fd);
  if (keyring_fd >= 0)
    close(keyring_fd);
  if (r)
    rbd_origin_close(&r->base);
  return rc;
}
