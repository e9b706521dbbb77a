/* SPDX-License-Identifier: Apache-2.0 */
/* The registry of attached volumes that the agent and its engine share
 * (engine.h, struct fc_host).  The agent adds nothing here itself: its
 * engine attaches, adopts and forgets volumes through these calls, and
 * the agent reads the registry to answer the control socket. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/rws.h"
#include "engine.h"
#include "common/lockcheck.h"

/* 2^62 bytes (4 EiB): no cache device is near it, any engine's block
 * rounds it up to at most itself, and it stays an int64 in the volume's
 * state file and in volume-show. */
#define CACHE_SIZE_MAX (1ull << 62)

int
fc_attach_request_check(const struct fc_attach_request *req, char *err, size_t errlen)
{
  if (!fc_volume_id_valid(req->volume_id)) {
    snprintf(err, errlen, "invalid volume id '%.80s': use 1-%d letters, digits, "
             "'-', '_' or '.', not starting with '.'", req->volume_id, FC_VOLUME_ID_MAX);
    return -EINVAL;
  }
  if (strlen(req->origin) >= FC_ORIGIN_MAX) {
    snprintf(err, errlen, "origin is longer than %d bytes", FC_ORIGIN_MAX - 1);
    return -ENAMETOOLONG;
  }
  /* Checked here, before each engine rounds it up to its block: a size of
   * 2^64 - 1 bytes (a control client's "18446744073709551615") rounded to
   * 0, and the volume was attached with a cache_size of 0, which its
   * state file then could not load. */
  if (req->cache_size > CACHE_SIZE_MAX) {
    snprintf(err, errlen, "cache_size %llu bytes is more than any cache device "
             "(at most %llu bytes)", (unsigned long long)req->cache_size,
             (unsigned long long)CACHE_SIZE_MAX);
    return -EINVAL;
  }
  return 0;
}

struct fc_volume *
fc_volume_from_request(const struct fc_attach_request *req, uint64_t cache_size)
{
  struct fc_volume *v = calloc(1, sizeof *v);

  if (!v)
    return NULL;
  snprintf(v->p.id, sizeof v->p.id, "%s", req->volume_id);
  snprintf(v->p.origin, sizeof v->p.origin, "%s", req->origin);
  v->p.cache_size = cache_size;
  v->p.write_policy = req->write_policy;
  v->p.admission = req->admission;
  v->p.rws_n = req->rws_n ? req->rws_n : 1;
  v->p.staging = req->staging_set ? req->staging : FC_STAGING_HYBRID;
  v->p.rws_window_s = req->rws_window_s;
  return v;
}

static int
json_opt_string(json_t *args, const char *key, const char **out, char *err,
                size_t errlen)
{
  json_t *j = json_object_get(args, key);

  *out = NULL;
  if (!j || json_is_null(j))
    return 0;
  if (!json_is_string(j)) {
    snprintf(err, errlen, "argument '%s' must be a string", key);
    return -EINVAL;
  }
  *out = json_string_value(j);
  return 0;
}

static int
json_opt_uint(json_t *args, const char *key, unsigned lo, unsigned hi,
              unsigned *out, char *err, size_t errlen)
{
  json_t *j = json_object_get(args, key);

  if (!j || json_is_null(j))
    return 0;
  if (!json_is_integer(j) || json_integer_value(j) < lo ||
      json_integer_value(j) > hi) {
    snprintf(err, errlen, "argument '%s' must be an integer from %u to %u",
             key, lo, hi);
    return -EINVAL;
  }
  *out = (unsigned)json_integer_value(j);
  return 0;
}

int
fc_attach_request_policy_from_json(json_t *args, struct fc_attach_request *req,
                                   char *err, size_t errlen)
{
  const char *policy, *admission, *staging;
  int r;

  if ((r = json_opt_string(args, "write_policy", &policy, err, errlen)) ||
      (r = json_opt_string(args, "admission", &admission, err, errlen)) ||
      (r = json_opt_string(args, "staging", &staging, err, errlen)) ||
      (r = json_opt_uint(args, "rws_n", 1, FC_RWS_MAX_N, &req->rws_n, err, errlen)) ||
      (r = json_opt_uint(args, "rws_window_s", 1, FC_RWS_WINDOW_MAX_S,
                         &req->rws_window_s, err, errlen)))
    return r;
  if (policy && fc_write_policy_parse(policy, &req->write_policy)) {
    snprintf(err, errlen, "write_policy '%.40s' is not one of read_only, "
             "write_through, write_back", policy);
    return -EINVAL;
  }
  if (admission && fc_admission_parse(admission, &req->admission)) {
    snprintf(err, errlen, "admission '%.40s' is not one of all, rws", admission);
    return -EINVAL;
  }
  if (staging) {
    if (fc_staging_kind_parse(staging, &req->staging)) {
      snprintf(err, errlen, "staging '%.40s' is not one of address, data, hybrid",
               staging);
      return -EINVAL;
    }
    req->staging_set = true;
  }
  return 0;
}

int
fc_volume_policy_to_json(const struct fc_volume_params *p, json_t *o)
{
  if (json_object_set_new(o, "write_policy", json_string(fc_write_policy_name(p->write_policy))) ||
      json_object_set_new(o, "admission", json_string(fc_admission_name(p->admission))) ||
      json_object_set_new(o, "rws_n", json_integer(p->rws_n)) ||
      json_object_set_new(o, "staging", json_string(fc_staging_kind_name(p->staging))))
    return -ENOMEM;
  if (p->rws_window_s &&
      json_object_set_new(o, "rws_window_s", json_integer(p->rws_window_s)))
    return -ENOMEM;
  return 0;
}

struct fc_volume *
fc_host_find_locked(struct fc_host *host, const char *id)
{
  FC_ASSERT_HELD(&host->lock);
  for (unsigned i = 0; i < host->nr_volumes; i++)
    if (!strcmp(host->volumes[i]->p.id, id))
      return host->volumes[i];
  return NULL;
}

/* The volume that already caches origin's disk, however spelled. */
static struct fc_volume *
find_disk_locked(struct fc_host *host, const char *origin)
{
  FC_ASSERT_HELD(&host->lock);
  for (unsigned i = 0; i < host->nr_volumes; i++)
    if (fc_volume_same_origin(host->volumes[i]->p.origin, origin))
      return host->volumes[i];
  return NULL;
}

bool
fc_host_attach_is_new_locked(struct fc_host *host,
                             const struct fc_attach_request *req)
{
  FC_ASSERT_HELD(&host->lock);
  return !fc_host_find_locked(host, req->volume_id) &&
         !find_disk_locked(host, req->origin);
}

int
fc_host_attach_precheck_locked(struct fc_host *host,
                               const struct fc_attach_request *req,
                               uint64_t cache_size, struct fc_volume **out,
                               char *err, size_t errlen)
{
  FC_ASSERT_HELD(&host->lock);
  struct fc_volume *old = fc_host_find_locked(host, req->volume_id);

  if (old && old->leaving) {
    snprintf(err, errlen, "volume %s is being released by the live migration that "
             "moved it away (%s); attach it again once volume-show no longer "
             "lists it", req->volume_id, old->p.migration);
    return -EBUSY;
  }
  if (old) {
    if (!strcmp(old->p.origin, req->origin) &&
        old->p.write_policy == req->write_policy &&
        old->p.admission == req->admission && old->p.cache_size == cache_size &&
        old->p.rws_n == (req->rws_n ? req->rws_n : 1) &&
        old->p.staging == (req->staging_set ? req->staging : FC_STAGING_HYBRID) &&
        old->p.rws_window_s == req->rws_window_s &&
        host->ops->serving(old)) {
      *out = old;
      return 1;
    }
    snprintf(err, errlen, "volume %s is already attached with other parameters "
             "(origin %s, %s, %llu bytes); detach it first", req->volume_id,
             old->p.origin, fc_write_policy_name(old->p.write_policy),
             (unsigned long long)old->p.cache_size);
    return -EEXIST;
  }
  old = find_disk_locked(host, req->origin);
  if (old) {
    snprintf(err, errlen, "origin %s is the disk volume %s already caches "
             "(as %s); one disk has one cache on a host: detach %s first",
             req->origin, old->p.id, old->p.origin, old->p.id);
    return -EEXIST;
  }
  if (host->nr_volumes >= FC_MAX_VOLUMES) {
    snprintf(err, errlen, "this agent already serves %d volumes", FC_MAX_VOLUMES);
    return -EMFILE;
  }
  return 0;
}

void
fc_host_volume_free(struct fc_host *host, struct fc_volume *v)
{
  if (!v)
    return;
  if (v->priv)
    host->ops->volume_free(v);
  free(v);
}

void
fc_host_free_volumes(struct fc_host *host)
{
  for (unsigned i = 0; i < host->nr_volumes; i++)
    fc_host_volume_free(host, host->volumes[i]);
  host->nr_volumes = 0;
}

void
fc_host_forget_locked(struct fc_host *host, struct fc_volume *v)
{
  FC_ASSERT_HELD(&host->lock);
  if (host->forgetting)
    host->forgetting(host, v);
  for (unsigned i = 0; i < host->nr_volumes; i++) {
    if (host->volumes[i] == v) {
      host->volumes[i] = host->volumes[--host->nr_volumes];
      break;
    }
  }
  fc_host_volume_free(host, v);
}

int
fc_host_load_volumes(struct fc_host *host,
                     int (*adopt)(struct fc_host *host, struct fc_volume *v),
                     char *err, size_t errlen)
{
  DIR *d = opendir(host->volumes_dir);
  struct dirent *de;
  int r = 0;

  if (!d) {
    r = -errno;
    snprintf(err, errlen, "cannot read %s: %s", host->volumes_dir, strerror(-r));
    return r;
  }
  while ((de = readdir(d))) {
    size_t len = strlen(de->d_name);
    char path[FC_PATH_MAX + 400];
    struct fc_volume *v;

    if (len < 6 || strcmp(de->d_name + len - 5, ".json"))
      continue;
    if (host->nr_volumes >= FC_MAX_VOLUMES) {
      r = -EMFILE;
      snprintf(err, errlen, "more than %d volumes in %s", FC_MAX_VOLUMES,
               host->volumes_dir);
      break;
    }
    v = calloc(1, sizeof *v);
    if (!v) {
      r = -ENOMEM;
      break;
    }
    snprintf(path, sizeof path, "%s/%s", host->volumes_dir, de->d_name);
    r = fc_volume_params_load(path, &v->p, err, errlen);
    if (!r && (r = adopt(host, v)))
      snprintf(err, errlen, "volume %s: %s", v->p.id, strerror(-r));
    if (r) {
      fc_host_volume_free(host, v);
      break;
    }
    host->volumes[host->nr_volumes++] = v;
  }
  closedir(d);
  return r;
}
