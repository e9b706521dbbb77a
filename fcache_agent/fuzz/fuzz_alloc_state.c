/* SPDX-License-Identifier: Apache-2.0 */
/* A volume's allocation state (ucache/allocator.c, alloc/predict.c): the
 * input is <state_dir>/volumes/vol-1.alloc, the predictor history and
 * share that uc_allocator_volume_init() reads when the volume is attached
 * (at an attach, and for each volume when the agent starts).  The harness
 * drives a real agent (fuzz_agent.h, allocation = rwss, the default)
 * through its control operations: volume-attach of vol-1, which loads the
 * file, feeds its history to the outlier filter and the predictor and
 * recomputes the host's shares; volume-show, which reports the
 * prediction; volume-detach, which removes the file.  The history values
 * are demands in blocks as persist() writes them (JSON reals).  A
 * migration's source sends the same object in its HELLO, and the
 * destination checks it with the same code (apply_state). */
#include "fuzz_agent.h"
#include "control/control_ops.h"

static struct fc_agent *agent;
static char state_path[FC_PATH_MAX + 64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  agent = fuzz_agent_open();
  snprintf(state_path, sizeof state_path, "%s/volumes/vol-1.alloc",
           fuzz_cfg.state_dir);
  return 0;
}

static int op(const char *name, json_t *args, json_t **result)
{
  char err[1024];

  *result = NULL;
  for (const struct fc_control_op *o = fc_agent_control_ops; o->name; o++)
    if (!strcmp(o->name, name))
      return o->handler(agent, args, result, err, sizeof err);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  json_t *attach, *id, *res;
  int fd, r;

  fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
    abort();
  close(fd);
  attach = json_pack("{s:s, s:s, s:s}", "volume_id", "vol-1", "origin",
                     fuzz_origin, "cache_size", "64K");
  id = json_pack("{s:s}", "volume_id", "vol-1");
  if (!attach || !id)
    abort();
  r = op("volume-attach", attach, &res);
  json_decref(res);
  if (r)
    abort();
  if (op("volume-show", id, &res) || !res)
    abort();
  /* The predicted demand is shown in bytes: never negative. */
  {
    json_t *p = json_object_get(json_object_get(res, "allocation"),
                                "rwss_predicted_bytes");

    if (json_is_integer(p) && json_integer_value(p) < 0)
      abort();
  }
  json_decref(res);
  if (op("volume-detach", id, &res))
    abort();
  json_decref(res);
  json_decref(attach);
  json_decref(id);
  if (agent->host.nr_volumes)
    agent = fuzz_agent_reset(agent);
  return 0;
}
