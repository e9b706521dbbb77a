/* SPDX-License-Identifier: Apache-2.0 */
/* QEMU's rbd: filename syntax, read strictly; see rbd_spec.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "rbd_spec.h"

/* Copies one token of s (up to an unescaped character of `stops`, or the
 * end) into out, unescaped.  Returns how much of s it used, or -1 when the
 * token does not fit or ends in a lone backslash. */
static long
token(const char *s, const char *stops, char *out, size_t outlen)
{
  size_t n = 0;
  long i = 0;

  while (s[i] && !strchr(stops, s[i])) {
    char c = s[i];

    if (c == '\\') {
      if (!s[i + 1])
        return -1;
      c = s[++i];
    }
    if (n + 1 >= outlen)
      return -1;
    out[n++] = c;
    i++;
  }
  out[n] = '\0';
  return i;
}

static int
bad(char *err, size_t errlen, const char *s, const char *why)
{
  snprintf(err, errlen, "RBD origin '%.200s': %s; write "
           "rbd:POOL[/NAMESPACE]/IMAGE[:id=USER][:conf=PATH][:keyring=PATH]"
           "[:mon_host=HOST\\:PORT;...]", s, why);
  return -EINVAL;
}

static int
option(struct fc_rbd_spec *o, const char *key, const char *value,
       const char *s, char *err, size_t errlen)
{
  static const struct { const char *name; size_t off, size; } opts[] = {
    { "id", offsetof(struct fc_rbd_spec, id), FC_RBD_NAME_MAX },
    { "conf", offsetof(struct fc_rbd_spec, conf), FC_PATH_MAX },
    { "keyring", offsetof(struct fc_rbd_spec, keyring), FC_PATH_MAX },
    { "mon_host", offsetof(struct fc_rbd_spec, mon_host), FC_RBD_MON_HOST_MAX },
  };

  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    char *field = (char *)o + opts[i].off;

    if (strcmp(key, opts[i].name))
      continue;
    if (field[0])
      return bad(err, errlen, s, "an option is given twice");
    if (!value[0] || strlen(value) >= opts[i].size)
      return bad(err, errlen, s, "an option's value is empty or too long");
    strcpy(field, value);
    return 0;
  }
  snprintf(err, errlen, "RBD origin '%.200s': unknown option '%.64s'; the "
           "agent takes id, conf, keyring and mon_host only (other librados "
           "settings belong in the conf file)", s, key);
  return -EINVAL;
}

int
fc_rbd_spec_parse(const char *s, struct fc_rbd_spec *out, char *err,
                  size_t errlen)
{
  char parts[3][FC_RBD_NAME_MAX];
  const char *p;
  unsigned n = 0;
  long used;
  int r;

  memset(out, 0, sizeof *out);
  if (!fc_rbd_spec_is_rbd(s))
    return bad(err, errlen, s, "not an rbd: origin");
  p = s + 4;
  for (;;) {
    used = token(p, "/:@", parts[n], sizeof parts[n]);
    if (used <= 0)
      return bad(err, errlen, s, "a pool, namespace or image name is empty "
                 "or too long");
    p += used;
    n++;
    if (*p != '/')
      break;
    if (n == 3)
      return bad(err, errlen, s, "too many '/'");
    p++;
  }
  if (*p == '@')
    return bad(err, errlen, s, "a snapshot is read-only and cannot be a "
               "cache's origin");
  if (n < 2)
    return bad(err, errlen, s, "no image name");
  strcpy(out->pool, parts[0]);
  strcpy(out->image, parts[n - 1]);
  if (n == 3)
    strcpy(out->ns, parts[1]);
  while (*p == ':') {
    char key[16], value[FC_RBD_MON_HOST_MAX];

    used = token(++p, "=:", key, sizeof key);
    if (used <= 0 || p[used] != '=')
      return bad(err, errlen, s, "an option is not key=value");
    p += used + 1;
    used = token(p, ":", value, sizeof value);
    if (used < 0)
      return bad(err, errlen, s, "an option's value is too long");
    p += used;
    r = option(out, key, value, s, err, errlen);
    if (r < 0)
      return r;
  }
  if (*p)
    return bad(err, errlen, s, "unexpected characters after the image");
  return 0;
}
