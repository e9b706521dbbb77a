/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/enum_names.h"
#include "common/fdio.h"
#include "common/random_hex.h"
#include "engine.h"
#include "volume.h"

bool
fc_volume_id_valid(const char *id)
{
  size_t n = strlen(id);

  if (n == 0 || n > FC_VOLUME_ID_MAX || id[0] == '.')
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return true;
}

static const char *const policy_names[] = { "read_only", "write_through", "write_back" };
static const char *const admission_names[] = { "all", "rws" };

FC_DEFINE_ENUM_NAMES(fc_write_policy, enum fc_write_policy, policy_names)

FC_DEFINE_ENUM_NAMES(fc_admission, enum fc_admission, admission_names)

int
fc_volume_params_save(const char *dir, const struct fc_volume_params *p,
                      char *err, size_t errlen)
{
  char path[4096];
  char tag[17];
  json_t *o;
  int r;
  char *text;

  snprintf(path, sizeof path, "%s/%s.json", dir, p->id);
  snprintf(tag, sizeof tag, "%016llx", (unsigned long long)p->tag);
  o = json_pack("{s:s, s:s, s:I, s:s}", "volume_id", p->id,
                "origin", p->origin, "cache_size", (json_int_t)p->cache_size,
                "tag", tag);
  if (!o)
    return -ENOMEM;
  if (fc_volume_policy_to_json(p, o)) {
    json_decref(o);
    return -ENOMEM;
  }
  if (p->migration[0])
    json_object_set_new(o, "migration", json_string(p->migration));
  if (p->export_secret[0])
    json_object_set_new(o, "export_secret", json_string(p->export_secret));
  if (p->migration[0] && p->settle_secret[0]) {
    json_object_set_new(o, "settle_secret", json_string(p->settle_secret));
    json_object_set_new(o, "settle_peer", json_string(p->settle_peer));
  }
  text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(o);
  if (!text)
    return -ENOMEM;
  r = fc_replace_file_durable(dir, path, text, strlen(text));
  if (r)
    snprintf(err, errlen, "cannot save volume state %s: %s", path, strerror(-r));
  free(text);
  return r;
}

int
fc_volume_params_load(const char *path, struct fc_volume_params *p,
                      char *err, size_t errlen)
{
  const char *id, *origin, *policy, *admission, *tag;
  json_int_t size;
  json_error_t je;
  json_t *o;
  int r = -EINVAL;

  o = json_load_file(path, 0, &je);
  if (!o) {
    snprintf(err, errlen, "%s: %s", path, je.text);
    return -EINVAL;
  }
  if (json_unpack_ex(o, &je, 0, "{s:s, s:s, s:I, s:s, s:s, s:s}",
                     "volume_id", &id, "origin", &origin, "cache_size", &size,
                     "write_policy", &policy, "admission", &admission,
                     "tag", &tag)) {
    snprintf(err, errlen, "%s: %s", path, je.text);
    goto out;
  }
  memset(p, 0, sizeof *p);
  if (!fc_volume_id_valid(id) || strlen(origin) >= sizeof p->origin || size <= 0 ||
      fc_write_policy_parse(policy, &p->write_policy) ||
      fc_admission_parse(admission, &p->admission) ||
      sscanf(tag, "%16llx", (unsigned long long *)&p->tag) != 1 || p->tag == 0) {
    snprintf(err, errlen, "%s: invalid volume state", path);
    goto out;
  }
  snprintf(p->id, sizeof p->id, "%s", id);
  snprintf(p->origin, sizeof p->origin, "%s", origin);
  {
    const char *mig = json_string_value(json_object_get(o, "migration"));
    if (mig)
      snprintf(p->migration, sizeof p->migration, "%s", mig);
  }
  {
    json_t *sec = json_object_get(o, "export_secret");

    /* Absent in files written before exports had names; anything else
     * that is not a secret is a damaged file, not a volume to serve
     * under whatever name it happens to hold. */
    if (sec && (!json_is_string(sec) ||
                !fc_export_secret_valid(json_string_value(sec)))) {
      snprintf(err, errlen, "%s: invalid export_secret", path);
      goto out;
    }
    if (sec)
      snprintf(p->export_secret, sizeof p->export_secret, "%s",
               json_string_value(sec));
  }
  {
    json_t *sec = json_object_get(o, "settle_secret");
    const char *peer = json_string_value(json_object_get(o, "settle_peer"));

    /* Absent where the migration's peer agent predates settling through
     * the agents: the two-socket settle still works then. */
    if (sec && (!json_is_string(sec) || !peer || !peer[0] ||
                strlen(peer) >= sizeof p->settle_peer ||
                !fc_hex_valid(json_string_value(sec), FC_SETTLE_SECRET_HEX))) {
      snprintf(err, errlen, "%s: invalid settle_secret or settle_peer", path);
      goto out;
    }
    if (sec && p->migration[0]) {
      snprintf(p->settle_secret, sizeof p->settle_secret, "%s",
               json_string_value(sec));
      snprintf(p->settle_peer, sizeof p->settle_peer, "%s", peer);
    }
  }
  p->cache_size = (uint64_t)size;
  /* Files written before allocation existed have none of these: the
   * defaults a new attach gets. */
  {
    struct fc_attach_request req = { 0 };

    if (fc_attach_request_policy_from_json(o, &req, err, errlen)) {
      size_t len = strlen(err);
      snprintf(err + len, errlen - len, " (in %s)", path);
      goto out;
    }
    p->rws_n = req.rws_n ? req.rws_n : 1;
    p->staging = req.staging_set ? req.staging : FC_STAGING_HYBRID;
    p->rws_window_s = req.rws_window_s;
  }
  r = 0;
out:
  json_decref(o);
  return r;
}

int
fc_volume_params_remove(const char *dir, const char *id)
{
  char path[4096];

  snprintf(path, sizeof path, "%s/%s.json", dir, id);
  if (unlink(path) == -1 && errno != ENOENT)
    return -errno;
  return fc_fsync_dir(dir);
}

int
fc_volume_new_tag(uint64_t *tag)
{
  do {
    if (getrandom(tag, sizeof *tag, 0) != sizeof *tag)
      return -errno;
  } while (*tag == 0);
  return 0;
}
