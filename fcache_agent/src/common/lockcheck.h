/* SPDX-License-Identifier: Apache-2.0 */
/* Held-lock assertions (doc/contributor/design.rst, "Locking").  A function
 * named *_locked, or one whose comment says "Under x->lock", states its
 * lock with FC_ASSERT_HELD(&x->lock) on entry; a function that takes a lock
 * which must not be held already (host->lock around origin I/O) may state
 * that with FC_ASSERT_NOT_HELD.
 *
 * The sanitizer builds (make check, make asan, make fuzz) define
 * FC_LOCKCHECK and link with -Wl,--wrap for the pthread mutex calls, so
 * every lock and unlock in the agent's own code is recorded per thread
 * (lockcheck.c) and a broken contract aborts naming the function, file,
 * line and lock.  The release build (make) defines neither: the macros
 * compile to nothing, the lock calls go straight to libc. */
#ifndef FCACHE_LOCKCHECK_H
#define FCACHE_LOCKCHECK_H

#include <pthread.h>

#ifdef FC_LOCKCHECK

/* Aborts unless the calling thread holds (want_held) or does not hold
 * (!want_held) mutex m; the rest names the assertion in the message. */
void fc_lockcheck_assert(const pthread_mutex_t *m, int want_held, const char *expr,
                         const char *func, const char *file, int line);

#define FC_ASSERT_HELD(m) fc_lockcheck_assert((m), 1, #m, __func__, __FILE__, __LINE__)
#define FC_ASSERT_NOT_HELD(m) fc_lockcheck_assert((m), 0, #m, __func__, __FILE__, __LINE__)

#else

/* sizeof evaluates nothing; it only keeps the expression's variables used. */
#define FC_ASSERT_HELD(m) ((void)sizeof(m))
#define FC_ASSERT_NOT_HELD(m) ((void)sizeof(m))

#endif

#endif
