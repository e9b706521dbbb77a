/* SPDX-License-Identifier: Apache-2.0 */
/* The origin strings a control-socket client sends: QEMU's rbd: syntax
 * (common/rbd_spec.c) and NBD URIs (common/nbd_uri.c), the only parsing
 * the agent does of an origin before it decides what to open.  The input
 * is the string itself (a NUL ends it early, as the JSON layer would have
 * refused it).
 *
 * Beyond not crashing: an rbd: origin the parser accepts, written back in
 * the same syntax with every special character escaped, parses to the
 * same fields -- what the agent checks (origin_rbd_dirs, the identity of
 * a volume) is what librados will be given. */
#include "fuzz.h"
#include "common/nbd_uri.h"
#include "common/rbd_spec.h"

static void
append_escaped(char *out, size_t *n, size_t cap, const char *s)
{
  for (; *s; s++) {
    if (strchr(":/@\\=", *s) && *n + 1 < cap)
      out[(*n)++] = '\\';
    if (*n + 1 < cap)
      out[(*n)++] = *s;
  }
  out[*n] = '\0';
}

static void
append(char *out, size_t *n, size_t cap, const char *s)
{
  while (*s && *n + 1 < cap)
    out[(*n)++] = *s++;
  out[*n] = '\0';
}

static void
check_rbd_round_trip(const struct fc_rbd_spec *a)
{
  static const struct { const char *key; size_t off; } opts[] = {
    { ":id=", offsetof(struct fc_rbd_spec, id) },
    { ":conf=", offsetof(struct fc_rbd_spec, conf) },
    { ":keyring=", offsetof(struct fc_rbd_spec, keyring) },
    { ":mon_host=", offsetof(struct fc_rbd_spec, mon_host) },
  };
  char again[8192], err[512];
  struct fc_rbd_spec b;
  size_t n = 0;

  if (!a->pool[0] || !a->image[0])
    abort();
  append(again, &n, sizeof again, "rbd:");
  append_escaped(again, &n, sizeof again, a->pool);
  append(again, &n, sizeof again, "/");
  if (a->ns[0]) {
    append_escaped(again, &n, sizeof again, a->ns);
    append(again, &n, sizeof again, "/");
  }
  append_escaped(again, &n, sizeof again, a->image);
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    const char *v = (const char *)a + opts[i].off;

    if (v[0]) {
      append(again, &n, sizeof again, opts[i].key);
      append_escaped(again, &n, sizeof again, v);
    }
  }
  if (n + 1 >= sizeof again)
    return;                     /* cannot happen with the fields' bounds */
  if (fc_rbd_spec_parse(again, &b, err, sizeof err) != 0 ||
      memcmp(a, &b, sizeof b) != 0)
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *s = malloc(size + 1), err[512];
  struct fc_rbd_spec spec;
  struct fc_nbd_uri uri;

  if (!s)
    return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  if (fc_rbd_spec_parse(s, &spec, err, sizeof err) == 0)
    check_rbd_round_trip(&spec);
  else if (!err[0] || !memchr(err, '\0', sizeof err))
    abort();                    /* a refusal always says why */
  if (fc_nbd_uri_parse(s, &uri) == 0 &&
      (!memchr(uri.export, '\0', sizeof uri.export) ||
       !memchr(uri.host, '\0', sizeof uri.host) ||
       !memchr(uri.socket, '\0', sizeof uri.socket)))
    abort();
  free(s);
  return 0;
}
