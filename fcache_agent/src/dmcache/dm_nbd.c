/* SPDX-License-Identifier: Apache-2.0 */
/* A kernel NBD device fed by the agent (dm_nbd.h): the socketpair, the
 * netlink conversation with the kernel's NBD client (messages from
 * dm_nbd_msg.c), and the NBD server answering on our end.
 *
 * Plain AF_NETLINK sockets: three requests, each answered by at most one
 * message and an acknowledgement, do not call for libnl.  The relay's
 * end is served before the kernel gets its own, because the kernel reads
 * the device (a partition scan) as soon as the device is connected. */
#include "dm_nbd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "common/log.h"
#include "nbd/nbd_server.h"
#include "dm_nbd_msg.h"

/* The kernel answers netlink requests at once; only a stuck kernel takes
 * longer, and then the caller hears ETIMEDOUT rather than waiting. */
#define NL_TIMEOUT_S 10
/* The controller's answer lists the family's operations and policies: a
 * few KiB. */
#define NL_RECV_MAX (32u * 1024)
/* The largest request the kernel's NBD client sends (its queue's
 * max_hw_sectors, 65536 sectors). */
#define KERNEL_MAX_REQUEST (32u << 20)

struct dm_nbd {
  int nl;                     /* NETLINK_GENERIC socket */
  uint16_t family;            /* "nbd"'s id */
  uint32_t seq;
  int index;
  struct nbd_server *srv;
};

/* Send one request and gather the answer to it: 0 or the kernel's
 * -errno, with *ans filled. */
static int nl_call(struct dm_nbd *d, const uint8_t *msg, int len,
                   struct dm_nbd_answer *ans)
{
  uint8_t *buf = malloc(NL_RECV_MAX);
  int err = 0;

  if (!buf)
    return -ENOMEM;
  dm_nbd_answer_init(ans);
  while (send(d->nl, msg, (size_t)len, 0) < 0) {
    if (errno != EINTR) {
      err = -errno;
      goto out;
    }
  }
  while (!ans->done) {
    ssize_t n = recv(d->nl, buf, NL_RECV_MAX, MSG_TRUNC);

    if (n < 0) {
      if (errno == EINTR)
        continue;
      err = errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
      goto out;
    }
    if ((size_t)n > NL_RECV_MAX) {
      err = -EMSGSIZE;
      goto out;
    }
    if ((err = dm_nbd_msg_parse(buf, (size_t)n, d->seq, ans)) < 0)
      goto out;
  }
  err = ans->error;
out:
  free(buf);
  return err;
}

/* The netlink socket and the "nbd" family's id. */
static int nl_open(struct dm_nbd *d)
{
  struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
  struct timeval tv = { .tv_sec = NL_TIMEOUT_S };
  struct dm_nbd_answer ans;
  uint8_t msg[DM_NBD_MSG_MAX];
  int len, err;

  d->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
  if (d->nl < 0)
    return -errno;
  if (bind(d->nl, (struct sockaddr *)&sa, sizeof sa) < 0 ||
      setsockopt(d->nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
    return -errno;
  len = dm_nbd_msg_family(msg, sizeof msg, ++d->seq);
  if (len < 0)
    return len;
  err = nl_call(d, msg, len, &ans);
  if (err == -ENOENT) {
    log_error("dmcache: the kernel has no NBD client (load nbd.ko: "
              "modprobe nbd)");
    return err;
  }
  if (err == 0 && (ans.family < 0 || ans.family > UINT16_MAX))
    err = -EPROTO;
  if (err < 0) {
    log_error("dmcache: looking up the kernel's NBD netlink family: %s",
              strerror(-err));
    return err;
  }
  d->family = (uint16_t)ans.family;
  return 0;
}

static void nbd_free(struct dm_nbd *d)
{
  nbd_server_stop(d->srv);
  if (d->nl >= 0)
    close(d->nl);
  free(d);
}

static int check_export(const struct fc_export *exp)
{
  uint32_t b = exp->min_block;

  if (b < 512 || b > 4096 || (b & (b - 1))) {
    log_error("dmcache: NBD device block size %u: the kernel takes a power "
              "of two from 512 to 4096", b);
    return -EINVAL;
  }
  if (exp->max_block < KERNEL_MAX_REQUEST) {
    /* The kernel cannot be told a smaller maximum: its larger requests
     * would all fail. */
    log_error("dmcache: NBD device export takes requests of up to %u bytes; "
              "the kernel sends up to %u", exp->max_block, KERNEL_MAX_REQUEST);
    return -EINVAL;
  }
  return 0;
}

/* d with its netlink socket, a server, and the relay's end of a new
 * socketpair served; *kernel_fd is the kernel's end. */
static int relay_start(const struct fc_export *exp,
                       const struct dm_nbd_params *p, struct dm_nbd **out,
                       int *kernel_fd)
{
  struct dm_nbd *d = calloc(1, sizeof *d);
  int sv[2] = { -1, -1 }, err;

  *kernel_fd = -1;
  if (!d)
    return -ENOMEM;
  d->nl = -1;
  d->index = p->index;
  if ((err = check_export(exp)) < 0 || (err = nl_open(d)) < 0)
    goto fail;
  if (!(d->srv = nbd_server_start_connected("kernel NBD relay", exp,
                                            p->threads))) {
    err = -errno;
    goto fail;
  }
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    err = -errno;
    log_error("dmcache: socketpair for an NBD device: %s", strerror(-err));
    goto fail;
  }
  /* sv[1] is the server's from here on, whatever happens. */
  if ((err = nbd_server_serve_socket(d->srv, sv[1])) < 0) {
    close(sv[0]);
    goto fail;
  }
  *kernel_fd = sv[0];
  *out = d;
  return 0;
fail:
  nbd_free(d);
  return err;
}

int dm_nbd_connect(const struct fc_export *exp, const struct dm_nbd_params *p,
                   struct dm_nbd **out)
{
  struct dm_nbd *d;
  struct dm_nbd_answer ans;
  uint8_t msg[DM_NBD_MSG_MAX];
  int kfd, len, err;

  if ((err = relay_start(exp, p, &d, &kfd)) < 0)
    return err;
  struct dm_nbd_conf conf = {
    .index = p->index, .size = exp->size, .block_size = exp->min_block,
    .timeout_s = p->timeout_s, .dead_conn_timeout_s = p->dead_conn_timeout_s,
    .server_flags = nbd_server_tflags(exp), .fd = kfd,
  };
  len = dm_nbd_msg_connect(msg, sizeof msg, d->family, ++d->seq, &conf);
  err = len < 0 ? len : nl_call(d, msg, len, &ans);
  /* The kernel took its own reference to the socket, or refused it. */
  close(kfd);
  if (err == 0 && ans.index < 0)
    err = -EPROTO;
  if (err < 0) {
    log_error("dmcache: connecting NBD device %d: %s", p->index,
              strerror(-err));
    nbd_free(d);
    return err;
  }
  d->index = ans.index;
  log_info("dmcache: /dev/nbd%d connected (%llu bytes%s), served by the "
           "agent", d->index, (unsigned long long)exp->size,
           exp->read_only ? ", read-only" : "");
  *out = d;
  return 0;
}

int dm_nbd_reattach(const struct fc_export *exp, const struct dm_nbd_params *p,
                    struct dm_nbd **out)
{
  struct dm_nbd *d;
  struct dm_nbd_answer ans;
  uint8_t msg[DM_NBD_MSG_MAX];
  int kfd, len, err;

  if (p->index < 0)
    return -EINVAL;
  if ((err = relay_start(exp, p, &d, &kfd)) < 0)
    return err;
  len = dm_nbd_msg_reconfigure(msg, sizeof msg, d->family, ++d->seq,
                               (uint32_t)p->index, kfd);
  err = len < 0 ? len : nl_call(d, msg, len, &ans);
  close(kfd);
  if (err < 0) {
    log_error("dmcache: giving /dev/nbd%d a new socket: %s%s", p->index,
              strerror(-err), err == -ENOSPC ? " (its socket is alive)" : "");
    nbd_free(d);
    return err;
  }
  log_info("dmcache: /dev/nbd%d reattached, served by the agent again",
           p->index);
  *out = d;
  return 0;
}

int dm_nbd_index(const struct dm_nbd *d)
{
  return d->index;
}

int dm_nbd_revive(struct dm_nbd *d)
{
  struct dm_nbd_answer ans;
  uint8_t msg[DM_NBD_MSG_MAX];
  int sv[2], len, err;

  if (nbd_server_connections(d->srv) > 0)
    return 0;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return -errno;
  if ((err = nbd_server_serve_socket(d->srv, sv[1])) < 0) {
    close(sv[0]);
    return err;
  }
  len = dm_nbd_msg_reconfigure(msg, sizeof msg, d->family, ++d->seq,
                               (uint32_t)d->index, sv[0]);
  err = len < 0 ? len : nl_call(d, msg, len, &ans);
  close(sv[0]);       /* the kernel holds its own reference, or refused */
  if (err < 0) {
    log_error("dmcache: giving /dev/nbd%d a new socket after the kernel dropped "
              "its relay's: %s", d->index, strerror(-err));
    return err;
  }
  log_warning("dmcache: /dev/nbd%d: the kernel dropped its relay's socket (a "
              "request timed out); reattached", d->index);
  return 1;
}

int dm_nbd_disconnect(struct dm_nbd *d)
{
  struct dm_nbd_answer ans;
  uint8_t msg[DM_NBD_MSG_MAX];
  int len, err;

  len = dm_nbd_msg_disconnect(msg, sizeof msg, d->family, ++d->seq,
                              (uint32_t)d->index);
  err = len < 0 ? len : nl_call(d, msg, len, &ans);
  if (err < 0)
    log_error("dmcache: disconnecting /dev/nbd%d: %s", d->index,
              strerror(-err));
  else
    log_info("dmcache: /dev/nbd%d disconnected", d->index);
  /* The kernel sent NBD_CMD_DISC and shut its end down: the server's
   * connection is ending, and stopping the server waits for it. */
  nbd_free(d);
  return err;
}

void dm_nbd_release(struct dm_nbd *d)
{
  log_info("dmcache: /dev/nbd%d left connected without its relay",
           d->index);
  nbd_free(d);
}
