/* SPDX-License-Identifier: Apache-2.0 */
/* fcache's version, one string for the agent, fcache-replay, agent-status
 * and the Python side: pbr's version of the git tree (tools/version.sh),
 * given to the build as FCACHE_VERSION.  Only version.c sees the macro, so
 * a new commit recompiles one file, not the agent. */
#ifndef FCACHE_VERSION_H
#define FCACHE_VERSION_H

const char *fc_version(void);

#endif
