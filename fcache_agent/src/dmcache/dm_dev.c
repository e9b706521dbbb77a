/* SPDX-License-Identifier: Apache-2.0 */
/* libdevmapper wrappers; see dm_dev.h. */
#include <errno.h>
#include <libdevmapper.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dm_dev.h"
#include "common/log.h"

void
fc_dm_setup(void)
{
  dm_udev_set_sync_support(0);
}

/* Run a task; on failure report op and name.  libdevmapper logs its own
 * detail (the kernel's reason) on stderr; errno from the ioctl is kept. */
static int
run(struct dm_task *dmt, const char *op, const char *name, char *err, size_t errlen)
{
  int r;

  if (dm_task_run(dmt))
    return 0;
  r = dm_task_get_errno(dmt);
  r = r ? -r : -EIO;
  if (err)
    snprintf(err, errlen, "device-mapper %s of %s failed: %s (see the agent's log "
             "and the kernel log for the target's reason)", op, name, strerror(-r));
  return r;
}

static struct dm_task *
task(int type, const char *name)
{
  struct dm_task *dmt = dm_task_create(type);

  if (dmt && name && !dm_task_set_name(dmt, name)) {
    dm_task_destroy(dmt);
    return NULL;
  }
  return dmt;
}

static int
add_targets(struct dm_task *dmt, const struct fc_dm_target *t, unsigned nr)
{
  for (unsigned i = 0; i < nr; i++)
    if (!dm_task_add_target(dmt, t[i].start, t[i].len, t[i].type, t[i].params))
      return -ENOMEM;
  return 0;
}

int
fc_dm_create(const char *name, const char *uuid, const struct fc_dm_target *t,
             unsigned nr, char *err, size_t errlen)
{
  struct dm_task *dmt = task(DM_DEVICE_CREATE, name);
  int r;

  if (!dmt || (uuid && !dm_task_set_uuid(dmt, uuid))) {
    r = -ENOMEM;
    goto out;
  }
  r = add_targets(dmt, t, nr);
  if (r)
    goto out;
  r = run(dmt, "create", name, err, errlen);
  /* Without udev the library makes the /dev/mapper node here. */
  dm_task_update_nodes();
out:
  if (dmt)
    dm_task_destroy(dmt);
  return r;
}

int
fc_dm_reload(const char *name, const struct fc_dm_target *t, unsigned nr,
             char *err, size_t errlen)
{
  struct dm_task *dmt = task(DM_DEVICE_RELOAD, name);
  int r = -ENOMEM;

  if (dmt && !(r = add_targets(dmt, t, nr)))
    r = run(dmt, "reload", name, err, errlen);
  if (dmt)
    dm_task_destroy(dmt);
  return r;
}

static int
simple(int type, const char *op, const char *name, char *err, size_t errlen)
{
  struct dm_task *dmt = task(type, name);
  int r;

  if (!dmt)
    return -ENOMEM;
  r = run(dmt, op, name, err, errlen);
  dm_task_destroy(dmt);
  dm_task_update_nodes();
  return r;
}

int
fc_dm_suspend(const char *name, char *err, size_t errlen)
{
  return simple(DM_DEVICE_SUSPEND, "suspend", name, err, errlen);
}

int
fc_dm_resume(const char *name, char *err, size_t errlen)
{
  return simple(DM_DEVICE_RESUME, "resume", name, err, errlen);
}

int
fc_dm_remove(const char *name, char *err, size_t errlen)
{
  return simple(DM_DEVICE_REMOVE, "remove", name, err, errlen);
}

int
fc_dm_info(const char *name, struct fc_dm_info *info)
{
  struct dm_task *dmt = task(DM_DEVICE_INFO, name);
  struct dm_info di;
  const char *uuid;
  int r = 0;

  memset(info, 0, sizeof *info);
  if (!dmt)
    return -ENOMEM;
  if (!dm_task_run(dmt) || !dm_task_get_info(dmt, &di)) {
    r = -EIO;
    goto out;
  }
  info->exists = di.exists;
  if (di.exists) {
    info->suspended = di.suspended;
    info->inactive_table = di.inactive_table;
    info->open_count = di.open_count;
    info->major = di.major;
    info->minor = di.minor;
    uuid = dm_task_get_uuid(dmt);
    snprintf(info->uuid, sizeof info->uuid, "%s", uuid ? uuid : "");
  }
out:
  dm_task_destroy(dmt);
  return r;
}

static int
first_params(int type, const char *op, const char *name, char *params, size_t len,
             char *err, size_t errlen)
{
  struct dm_task *dmt = task(type, name);
  uint64_t start, length;
  char *ttype = NULL, *p = NULL;
  int r;

  if (!dmt)
    return -ENOMEM;
  r = run(dmt, op, name, err, errlen);
  if (!r) {
    dm_get_next_target(dmt, NULL, &start, &length, &ttype, &p);
    if (!ttype || !p) {
      snprintf(err, errlen, "device-mapper device %s has no table", name);
      r = -ENODATA;
    } else {
      snprintf(params, len, "%s", p);
    }
  }
  dm_task_destroy(dmt);
  return r;
}

int
fc_dm_status(const char *name, char *params, size_t len, char *err, size_t errlen)
{
  return first_params(DM_DEVICE_STATUS, "status", name, params, len, err, errlen);
}

int
fc_dm_table(const char *name, char *params, size_t len, char *err, size_t errlen)
{
  return first_params(DM_DEVICE_TABLE, "table", name, params, len, err, errlen);
}

int
fc_dm_message(const char *name, const char *msg, char *err, size_t errlen)
{
  struct dm_task *dmt = task(DM_DEVICE_TARGET_MSG, name);
  int r = -ENOMEM;

  if (dmt && dm_task_set_sector(dmt, 0) && dm_task_set_message(dmt, msg))
    r = run(dmt, "message", name, err, errlen);
  if (dmt)
    dm_task_destroy(dmt);
  return r;
}

int
fc_dm_list(int (*fn)(void *ctx, const char *name), void *ctx)
{
  struct dm_task *dmt = task(DM_DEVICE_LIST, NULL);
  struct dm_names *n;
  unsigned next = 0;
  int r = 0;

  if (!dmt)
    return -ENOMEM;
  if (!dm_task_run(dmt) || !(n = dm_task_get_names(dmt))) {
    r = -EIO;
    goto out;
  }
  if (!n->dev)
    goto out;
  do {
    n = (struct dm_names *)((char *)n + next);
    r = fn(ctx, n->name);
    next = n->next;
  } while (!r && next);
out:
  dm_task_destroy(dmt);
  return r;
}

/* "<md block> <used>/<total> <region> <hydrated>/<total> <hydrating> ..."
 * (the kernel's Documentation/admin-guide/device-mapper/dm-clone.rst); the
 * metadata mode is the last word: "rw", "ro" or "Fail", and a failed
 * metadata device may report "Fail" alone. */
int
fc_dm_clone_status(const char *name, uint64_t *hydrated, uint64_t *total,
                   uint64_t *hydrating, bool *failed)
{
  char params[512], e2[256], *last;
  unsigned long long mb, mu, mt, rs, h, t, hg;
  int r = fc_dm_status(name, params, sizeof params, e2, sizeof e2);

  if (r)
    return r;
  if (!strcmp(params, "Fail")) {
    *failed = true;
    return 0;
  }
  if (sscanf(params, "%llu %llu/%llu %llu %llu/%llu %llu", &mb, &mu, &mt, &rs, &h, &t,
             &hg) != 7)
    return -EPROTO;
  last = strrchr(params, ' ');
  *failed = last && !strcmp(last + 1, "Fail");
  *hydrated = h;
  *total = t;
  *hydrating = hg;
  return 0;
}

int
fc_dm_clone_pulse(const char *above, const char *clone, unsigned max_ms,
                  uint64_t *copying, char *err, size_t errlen)
{
  uint64_t hydrated, total, hydrating = 0, last = 0;
  bool failed = false;
  char e2[256];
  int r;

  *copying = 0;
  if ((r = fc_dm_suspend(above, err, errlen)))
    return r;
  /* enable_hydration wakes the clone's worker only when hydration was
   * off, hence the disable first.  The worker starts copies until the VM
   * has I/O in flight again, so the device resumes only once their number
   * has stopped growing. */
  if (!fc_dm_message(clone, "disable_hydration", e2, sizeof e2) &&
      !fc_dm_message(clone, "enable_hydration", e2, sizeof e2)) {
    for (unsigned i = 0; i < max_ms; i++) {
      nanosleep(&(struct timespec){ 0, 1000000L }, NULL);
      if (fc_dm_clone_status(clone, &hydrated, &total, &hydrating, &failed) || failed ||
          (hydrating && hydrating == last))
        break;
      last = hydrating;
    }
  }
  *copying = hydrating;
  return fc_dm_resume(above, err, errlen);
}
