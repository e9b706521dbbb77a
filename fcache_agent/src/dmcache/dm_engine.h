/* SPDX-License-Identifier: Apache-2.0 */
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
 * libdevmapper is not thread-safe: every device-mapper call is made under
 * host->lock. */
#ifndef FCACHE_DM_ENGINE_H
#define FCACHE_DM_ENGINE_H

#include "engine/engine.h"

/* The engine's operations (engine.h): open adopts or re-creates the
 * persisted volumes' devices, close frees memory only (the devices keep
 * serving), detach drains a write_back volume with the cleaner policy
 * first and refuses a device the VM still holds open (-EBUSY). */
extern const struct fc_engine_ops fc_dm_engine;

#endif
