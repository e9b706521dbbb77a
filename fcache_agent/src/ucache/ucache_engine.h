/* SPDX-License-Identifier: Apache-2.0 */
/* The ucache engine (engine.h): the host's cache file and its metadata,
 * one ucache (ucache.h) per volume behind an NBD export.  The only thing
 * other folders may take from ucache/. */
#ifndef FCACHE_UCACHE_ENGINE_H
#define FCACHE_UCACHE_ENGINE_H

#include "engine/engine.h"

extern const struct fc_engine_ops fc_ucache_engine;

#endif
