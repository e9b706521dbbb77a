/* SPDX-License-Identifier: Apache-2.0 */
/* Who is on the other end of a control connection, and what it may do.
 *
 * Why two groups: whoever may attach a volume chooses what the agent (root)
 * opens and serves; whoever may only read status learns names and figures.
 * Monitoring and operators' shells need the second, nova-compute the first.
 *
 * The peer is what SO_PEERCRED reports for the process that connected;
 * its groups are its user's in the group database (getgrouplist), so a
 * process cannot gain a group by holding an inherited descriptor, and
 * removing a user from the group takes effect on the next connection.
 * The agent's own user (root in production; the tester when unit tests
 * run unprivileged) may do everything.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "control_conn.h"

/* A user in more groups than this is checked against the first ones only:
 * bounded memory whatever the database holds. */
#define MAX_GROUPS 4096

int fc_control_lookup_group(const char *name, gid_t *gid)
{
  struct group grp, *res = NULL;
  char *buf = NULL;
  int r = ERANGE;

  /* A group with many members needs more than any fixed buffer. */
  for (size_t size = 1024; r == ERANGE && size <= (1u << 20); size *= 2) {
    char *nbuf = realloc(buf, size);
    if (nbuf == NULL) {
      r = ENOMEM;
      break;
    }
    buf = nbuf;
    r = getgrnam_r(name, &grp, buf, size, &res);
  }
  if (r == 0 && res == NULL)
    r = ENOENT;
  if (r == 0)
    *gid = grp.gr_gid;
  free(buf);
  return -r;
}

/* The supplementary groups of uid's user, plus its primary group
 * (getgrouplist adds `gid`).  Returns how many, or -errno. */
static int user_groups(uid_t uid, gid_t gid, gid_t *groups, int max)
{
  struct passwd pw, *res = NULL;
  char *buf = NULL;
  int r = ERANGE, n = max;

  for (size_t size = 1024; r == ERANGE && size <= (1u << 16); size *= 2) {
    char *nbuf = realloc(buf, size);
    if (nbuf == NULL) {
      r = ENOMEM;
      break;
    }
    buf = nbuf;
    r = getpwuid_r(uid, &pw, buf, size, &res);
  }
  if (r == 0 && res == NULL)
    r = ENOENT;               /* a uid without a user: its gid only */
  if (r == 0 && getgrouplist(pw.pw_name, gid, groups, &n) < 0)
    n = max;                  /* truncated to the first max */
  free(buf);
  if (r)
    return -r;
  return n;
}

static bool is_member(const struct fc_access_group *g, gid_t gid,
                      const gid_t *groups, int n)
{
  if (!g->set)
    return false;
  if (gid == g->gid)
    return true;
  for (int i = 0; i < n; i++)
    if (groups[i] == g->gid)
      return true;
  return false;
}

void fc_control_peer_identify(const struct fc_control *ctl, int fd,
                              struct fc_peer *peer)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  gid_t *groups = NULL;
  int n = 0;

  memset(peer, 0, sizeof *peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
    log_warning("control: cannot identify the peer: %s", strerror(errno));
    return;
  }
  peer->pid = cred.pid;
  peer->uid = cred.uid;
  peer->gid = cred.gid;
  if (cred.uid == 0 || cred.uid == geteuid()) {
    peer->reader = peer->admin = true;
  } else {
    if (ctl->readers.set || ctl->admins.set) {
      groups = calloc(MAX_GROUPS, sizeof *groups);
      if (groups)
        n = user_groups(cred.uid, cred.gid, groups, MAX_GROUPS);
      if (n < 0)
        n = 0;
    }
    peer->admin = is_member(&ctl->admins, cred.gid, groups, n);
    peer->reader = peer->admin || is_member(&ctl->readers, cred.gid, groups, n);
    free(groups);
  }
  log_debug("control: connection from pid %ld uid %ld gid %ld: %s",
            (long)cred.pid, (long)cred.uid, (long)cred.gid,
            peer->admin ? "admin" : peer->reader ? "read-only" : "no access");
}

int fc_control_peer_allowed(const struct fc_control *ctl,
                            const struct fc_peer *peer,
                            const struct fc_control_op *op,
                            char *err, size_t errlen)
{
  const struct fc_access_group *need;

  if (op->access == FC_CONTROL_READ ? peer->reader : peer->admin)
    return 0;
  need = op->access == FC_CONTROL_READ ? &ctl->readers : &ctl->admins;
  if (need->set)
    snprintf(err, errlen, "operation '%s' %s: it needs root or membership of "
             "group '%s' (%s in the agent's configuration); uid %ld is not a "
             "member", op->name, op->access == FC_CONTROL_READ ?
             "reads agent state" : "changes agent state", need->name,
             op->access == FC_CONTROL_READ ? "control_group" :
             "control_admin_group", (long)peer->uid);
  else
    snprintf(err, errlen, "operation '%s' %s: it needs root (%s is empty in "
             "the agent's configuration); uid %ld is not root", op->name,
             op->access == FC_CONTROL_READ ? "reads agent state" :
             "changes agent state", op->access == FC_CONTROL_READ ?
             "control_group" : "control_admin_group", (long)peer->uid);
  return -EPERM;
}
