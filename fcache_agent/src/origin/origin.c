#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "origin.h"

int
fc_origin_open(const char *uri, unsigned connections,
               const struct fc_origin_policy *pol, struct fc_origin **out,
               char *err, size_t errlen)
{
  if (uri[0] == '/')
    return fc_origin_open_path(uri, pol, out, err, errlen);
  if (!strncmp(uri, "nbd://", 6) || !strncmp(uri, "nbd+unix://", 11) ||
      !strncmp(uri, "nbds://", 7) || !strncmp(uri, "nbds+unix://", 12))
    return fc_origin_open_nbd(uri, connections, pol, out, err, errlen);
  snprintf(err, errlen, "origin '%s' is neither an absolute path nor an "
           "nbd://, nbd+unix://, nbds:// or nbds+unix:// URI", uri);
  return -EINVAL;
}
