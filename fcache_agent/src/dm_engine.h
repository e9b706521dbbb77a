/* The dmcache engine: each attached volume is a kernel dm-cache device
 * over its origin, with metadata and data carved from the host's flash
 * device (cache_path) as dm-linear segments (flash_pool.h).
 *
 * Devices are named "<dm_prefix>-<volume id>" (the cache, the export the
 * VM opens as /dev/mapper/<name>), "...-cmeta" and "...-cdata", and carry
 * the UUID "FCACHE-<volume tag>-{cache,cmeta,cdata}": the tag is the
 * volume's random 64-bit tag persisted in its state file, so a restarted
 * agent adopts exactly the devices it created and refuses any other
 * device that merely has the same name.  The devices outlive the agent:
 * stopping the agent never stops the VM's I/O.
 *
 * All calls are made under agent->lock (libdevmapper is not thread-safe). */
#ifndef FCACHE_DM_ENGINE_H
#define FCACHE_DM_ENGINE_H

#include <jansson.h>
#include <stddef.h>

struct fc_agent;
struct fc_attach_request;
struct fc_volume;
struct fc_dm_engine;
struct fc_dmvol;

/* Open the flash pool, then adopt or re-create the persisted volumes'
 * devices.  Sets agent->dm. */
int fc_dm_engine_open(struct fc_agent *agent, char *err, size_t errlen);
/* Frees memory only; the devices keep serving. */
void fc_dm_engine_close(struct fc_dm_engine *e);

int fc_dm_attach_locked(struct fc_agent *agent, const struct fc_attach_request *req,
                        struct fc_volume **out, char *err, size_t errlen);
/* write_back volumes are drained with the cleaner policy first; a device
 * the VM still holds open is refused with -EBUSY. */
int fc_dm_detach_locked(struct fc_agent *agent, const char *id, char *err,
                        size_t errlen);

json_t *fc_dm_volume_json(struct fc_agent *agent, struct fc_volume *v);
json_t *fc_dm_status_json(struct fc_agent *agent);

void fc_dmvol_free(struct fc_dmvol *dv);

#endif
