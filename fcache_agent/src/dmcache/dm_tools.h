/* SPDX-License-Identifier: Apache-2.0 */
/* thin-provisioning-tools, run by the agent on metadata no live table
 * holds (the tools refuse live metadata: they open the device O_EXCL,
 * and a loaded dm-cache or dm-era table claims it).  Found on PATH.
 * Each returns 0, or -errno with the tool's last line of stderr in err. */
#ifndef FCACHE_DM_TOOLS_H
#define FCACHE_DM_TOOLS_H

#include <stddef.h>
#include <stdint.h>

/* cache_dump META -o XML */
int fc_dmc_dump_run(const char *meta_dev, const char *xml, char *err, size_t errlen);
/* cache_restore -i XML -o META --metadata-version 1: the version a table
 * without the metadata2 feature (ours) expects. */
int fc_dmc_restore_run(const char *xml, const char *meta_dev, char *err, size_t errlen);
/* era_invalidate --written-since ERA -o XML META */
int fc_era_invalidate_run(const char *meta_dev, uint32_t since, const char *xml,
                          char *err, size_t errlen);

#endif
