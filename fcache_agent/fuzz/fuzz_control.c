/* SPDX-License-Identifier: Apache-2.0 */
/* The control socket: what a client of the control socket sends.
 *
 * The input is the client's whole side of one connection (newline-
 * delimited JSON requests), served by fc_control_conn_main(), the thread
 * function the control server runs per accepted socket: line framing, the
 * size limit, JSON parsing, the op lookup, and the agent's real operations
 * (control_ops.c, control_migr.c) with their argument handling, on a real
 * agent (fuzz_agent.h).  The literal $ORIGIN in the input is replaced by
 * the path of the agent's scratch origin, so a seed can attach a volume.
 *
 * Left out: migration-outgoing and migration-finish, the two operations
 * that wait on a peer agent (a connect, a completion) for seconds; their
 * argument handling is the same helpers' as the others', and the stream
 * they would open is fuzz_xfer's.
 */
#include <pthread.h>

#include "fuzz_agent.h"
#include "control/control_conn.h"
#include "control/control_ops.h"

static struct fc_agent *agent;
static struct fc_control_op ops[32];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  unsigned n = 0;

  for (const struct fc_control_op *op = fc_agent_control_ops; op->name; op++)
    if (strcmp(op->name, "migration-outgoing") &&
        strcmp(op->name, "migration-finish") && n + 1 < 32)
      ops[n++] = *op;
  agent = fuzz_agent_open();
  return 0;
}

/* The input with every $ORIGIN replaced (caller frees). */
static uint8_t *expand(const uint8_t *data, size_t size, size_t *out_len)
{
  static const char key[] = "$ORIGIN";
  size_t olen = strlen(fuzz_origin), klen = sizeof key - 1, n = 0;
  uint8_t *out = malloc(size * (olen > klen ? olen : 1) + 1);

  if (!out)
    abort();
  for (size_t i = 0; i < size;) {
    if (size - i >= klen && !memcmp(data + i, key, klen)) {
      memcpy(out + n, fuzz_origin, olen);
      n += olen;
      i += klen;
    } else {
      out[n++] = data[i++];
    }
  }
  *out_len = n;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  struct fc_control ctl = { .ops = ops, .opaque = agent, .n_active = 1 };
  struct fc_conn conn = { .ctl = &ctl };
  size_t len;
  uint8_t *in = expand(data, size, &len);
  int peer;

  pthread_mutex_init(&ctl.lock, NULL);
  conn.fd = fuzz_socket(in, len, &peer);
  free(in);
  /* As the accept thread does before it starts the connection's thread. */
  fc_control_peer_identify(&ctl, conn.fd, &conn.peer);
  fc_control_conn_main(&conn);  /* closes conn.fd */
  close(peer);
  pthread_mutex_destroy(&ctl.lock);
  if (agent->host.nr_volumes || agent->nr_migrations)
    agent = fuzz_agent_reset(agent);
  return 0;
}
