/* SPDX-License-Identifier: Apache-2.0 */
/* Which disk an origin names, whatever its spelling: two volumes over one
 * disk would be two caches, each serving (and, write_back, writing back)
 * its own idea of the same blocks.
 *
 *   a path      what it resolves to: a block device by its device number
 *               (/dev/sdb, /dev/disk/by-id/..., /dev/dm-3 spelled any way),
 *               anything else by its file system and inode;
 *   nbd+unix    the socket's inode and the export name;
 *   nbd (TCP)   host (case folded), port (10809 when absent) and export;
 *   rbd         pool, namespace and image (a second cluster with the same
 *               names is taken for the same: refused, never doubled).
 *
 * The nbds variants name the same disk as their plaintext twins.  An
 * origin that cannot be resolved (not there yet, a malformed URI) has no
 * identity and is compared with nothing: opening it fails anyway.
 */
#include <ctype.h>
#include <string.h>
#include <sys/stat.h>

#include "common/nbd_uri.h"
#include "common/rbd_spec.h"
#include "volume.h"

struct origin_identity {
  char kind;                    /* 'b', 'f', 'u', 't', 'r'; 0: unknown */
  dev_t dev;
  ino_t ino;
  struct fc_nbd_uri nbd;
  struct fc_rbd_spec rbd;
};

static void
identify(const char *origin, struct origin_identity *id)
{
  struct stat st;

  memset(id, 0, sizeof *id);
  if (origin[0] == '/') {
    if (stat(origin, &st) != 0)
      return;
    if (S_ISBLK(st.st_mode)) {
      id->kind = 'b';
      id->dev = st.st_rdev;
    } else {
      id->kind = 'f';
      id->dev = st.st_dev;
      id->ino = st.st_ino;
    }
    return;
  }
  if (fc_rbd_spec_is_rbd(origin)) {
    char err[8];

    if (fc_rbd_spec_parse(origin, &id->rbd, err, sizeof err) == 0)
      id->kind = 'r';
    return;
  }
  if (fc_nbd_uri_parse(origin, &id->nbd))
    return;
  if (id->nbd.is_unix) {
    if (stat(id->nbd.socket, &st) != 0)
      return;
    id->kind = 'u';
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return;
  }
  for (char *c = id->nbd.host; *c; c++)
    *c = (char)tolower((unsigned char)*c);
  id->kind = 't';
}

bool
fc_volume_same_origin(const char *a, const char *b)
{
  struct origin_identity x, y;

  if (!strcmp(a, b))
    return true;
  identify(a, &x);
  identify(b, &y);
  if (!x.kind || x.kind != y.kind)
    return false;
  switch (x.kind) {
  case 'b':
    return x.dev == y.dev;
  case 'f':
    return x.dev == y.dev && x.ino == y.ino;
  case 'u':
    return x.dev == y.dev && x.ino == y.ino &&
           !strcmp(x.nbd.export, y.nbd.export);
  case 'r':
    return !strcmp(x.rbd.pool, y.rbd.pool) && !strcmp(x.rbd.ns, y.rbd.ns) &&
           !strcmp(x.rbd.image, y.rbd.image);
  default:
    return !strcmp(x.nbd.host, y.nbd.host) &&
           !strcmp(x.nbd.port, y.nbd.port) &&
           !strcmp(x.nbd.export, y.nbd.export);
  }
}
