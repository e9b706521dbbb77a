/* SPDX-License-Identifier: Apache-2.0 */
/* NBD URIs, read for policy and identity (nbd_uri.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbd_uri.h"

/* Percent-decoding of n bytes of s into out; -1 when it does not fit. */
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
    if (c == '\0' || o + 1 >= outlen)
      return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return 0;
}

/* The decoded value of `key` in the query (after '?'). */
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

static const char *
after(const char *s, const char *prefix)
{
  size_t n = strlen(prefix);

  return strncmp(s, prefix, n) ? NULL : s + n;
}

static int
parse_authority(const char *a, size_t n, struct fc_nbd_uri *out)
{
  const char *close = memchr(a, ']', n);
  const char *colon = NULL;
  size_t hlen = n;

  /* The port follows the last ':' not inside an IPv6 literal's brackets. */
  for (size_t i = n; i-- > 0;) {
    if (a[i] == ':' && (!close || a + i > close)) {
      colon = a + i;
      break;
    }
  }
  if (colon) {
    size_t plen = n - (size_t)(colon + 1 - a);

    hlen = (size_t)(colon - a);
    if (plen == 0 || plen >= sizeof out->port)
      return -EINVAL;
    for (size_t i = 0; i < plen; i++)
      if (!isdigit((unsigned char)colon[1 + i]))
        return -EINVAL;
    memcpy(out->port, colon + 1, plen);
    out->port[plen] = '\0';
  } else {
    strcpy(out->port, "10809");
  }
  if (hlen == 0 || hlen >= sizeof out->host)
    return -EINVAL;
  memcpy(out->host, a, hlen);
  out->host[hlen] = '\0';
  return 0;
}

int
fc_nbd_uri_parse(const char *uri, struct fc_nbd_uri *out)
{
  const char *rest, *path, *query;
  size_t alen;

  memset(out, 0, sizeof *out);
  if ((rest = after(uri, "nbd+unix://")))
    out->is_unix = true;
  else if ((rest = after(uri, "nbds+unix://")))
    out->is_unix = out->tls = true;
  else if ((rest = after(uri, "nbds://")))
    out->tls = true;
  else if (!(rest = after(uri, "nbd://")))
    return -EINVAL;
  query = strchr(rest, '?');
  path = strchr(rest, '/');
  if (path && query && path > query)
    path = NULL;
  alen = (size_t)((path ? path : query ? query : rest + strlen(rest)) - rest);
  if (path && unescape(path + 1, (size_t)((query ? query : path +
                                           strlen(path)) - path - 1),
                       out->export, sizeof out->export))
    return -EINVAL;
  if (out->is_unix) {
    if (alen != 0 || !query ||
        query_param(query + 1, "socket", out->socket, sizeof out->socket))
      return -EINVAL;
    return 0;
  }
  return parse_authority(rest, alen, out);
}
