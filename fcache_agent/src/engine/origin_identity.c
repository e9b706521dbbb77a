/* Which disk an origin names, whatever its spelling: two volumes over one
 * disk would be two caches, each serving (and, write_back, writing back)
 * its own idea of the same blocks.
 *
 *   a path      what it resolves to: a block device by its device number
 *               (/dev/sdb, /dev/disk/by-id/..., /dev/dm-3 spelled any way),
 *               anything else by its file system and inode;
 *   nbd+unix    the socket's inode and the export name;
 *   nbd (TCP)   host (case folded), port (10809 when absent) and export.
 *
 * The nbds variants name the same disk as their plaintext twins.  An
 * origin that cannot be resolved (not there yet, a malformed URI) has no
 * identity and is compared with nothing: opening it fails anyway.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "volume.h"

#define NBD_DEFAULT_PORT "10809"

struct origin_identity {
  char kind;                    /* 'b', 'f', 'u', 't'; 0: unknown */
  dev_t dev;
  ino_t ino;
  char where[300];              /* host:port for 't' */
  char export[256];
};

/* URI decoding of an export name or socket path: %XX only. */
static int
unescape(const char *s, size_t n, char *out, size_t outlen)
{
  size_t o = 0;

  for (size_t i = 0; i < n; i++) {
    char c = s[i];

    if (c == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
        isxdigit((unsigned char)s[i + 2])) {
      char hex[3] = { s[i + 1], s[i + 2], 0 };

      c = (char)strtol(hex, NULL, 16);
      i += 2;
    }
    if (o + 1 >= outlen)
      return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return 0;
}

/* The value of query parameter `key` in `query` (after '?'), decoded. */
static int
query_param(const char *query, const char *key, char *out, size_t outlen)
{
  size_t klen = strlen(key);

  for (const char *p = query; p && *p;) {
    const char *end = strchr(p, '&');
    size_t len = end ? (size_t)(end - p) : strlen(p);

    if (len > klen && !strncmp(p, key, klen) && p[klen] == '=')
      return unescape(p + klen + 1, len - klen - 1, out, outlen);
    p = end ? end + 1 : NULL;
  }
  return -1;
}

static bool
starts(const char *s, const char *prefix)
{
  return !strncmp(s, prefix, strlen(prefix));
}

static void
identify(const char *origin, struct origin_identity *id)
{
  const char *rest, *slash, *query;
  char sock[256];
  struct stat st;
  bool is_unix;

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
  if (starts(origin, "nbd+unix://") || starts(origin, "nbds+unix://"))
    is_unix = true;
  else if (starts(origin, "nbd://") || starts(origin, "nbds://"))
    is_unix = false;
  else
    return;
  rest = strstr(origin, "://") + 3;
  slash = strchr(rest, '/');
  query = strchr(rest, '?');
  if (query && slash && slash > query)
    slash = NULL;
  /* The export: the path after the authority's '/', up to the query. */
  if (slash && unescape(slash + 1, (size_t)((query ? query : slash + 1 +
                                             strlen(slash + 1)) - slash - 1),
                        id->export, sizeof id->export))
    return;
  if (is_unix) {
    if (!query || query_param(query + 1, "socket", sock, sizeof sock) ||
        stat(sock, &st) != 0)
      return;
    id->kind = 'u';
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return;
  }
  {
    size_t alen = (size_t)((slash ? slash : query ? query :
                            rest + strlen(rest)) - rest);
    const char *colon;

    if (alen == 0 || alen + sizeof ":" NBD_DEFAULT_PORT > sizeof id->where)
      return;
    for (size_t i = 0; i < alen; i++)
      id->where[i] = (char)tolower((unsigned char)rest[i]);
    id->where[alen] = '\0';
    /* "[::1]:10809", "host:10809", "host": the port is after the last
     * colon that is not inside brackets. */
    colon = strrchr(id->where, ':');
    if (!colon || (strchr(id->where, ']') && colon < strchr(id->where, ']')))
      strcat(id->where, ":" NBD_DEFAULT_PORT);
    id->kind = 't';
  }
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
    return x.dev == y.dev && x.ino == y.ino && !strcmp(x.export, y.export);
  default:
    return !strcmp(x.where, y.where) && !strcmp(x.export, y.export);
  }
}
