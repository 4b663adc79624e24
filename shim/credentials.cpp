// setuid, setgid, seteuid, setegid, setreuid, setregid, setresuid,
// setresgid, setgroups and initgroups: applied to every kernel thread by
// core/setxid (glibc's own broadcast cannot work with per-goroutine TCBs).
// Before goshim starts (or in 1:1 mode) glibc's functions do the job.
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/real.hpp"
#include "core/setxid.hpp"
#include "shim/shim.hpp"

using namespace goshim;

namespace {

int ret(long r) {
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return 0;
}

}  // namespace

#define GOSHIM_SETXID(NAME, NR, PARAMS, A0, A1, A2, CALL)          \
  GOSHIM_EXPORT int NAME PARAMS {                                   \
    if (!mn_active()) {                                             \
      return real::lazy::NAME() CALL;                               \
    }                                                               \
    return ret(setxid_all(NR, (long)(A0), (long)(A1), (long)(A2))); \
  }

GOSHIM_SETXID(setuid, SYS_setuid, (uid_t uid), uid, 0, 0, (uid))
GOSHIM_SETXID(setgid, SYS_setgid, (gid_t gid), gid, 0, 0, (gid))
GOSHIM_SETXID(setreuid, SYS_setreuid, (uid_t r, uid_t e), r, e, 0, (r, e))
GOSHIM_SETXID(setregid, SYS_setregid, (gid_t r, gid_t e), r, e, 0, (r, e))
GOSHIM_SETXID(setresuid, SYS_setresuid, (uid_t r, uid_t e, uid_t s), r, e, s, (r, e, s))
GOSHIM_SETXID(setresgid, SYS_setresgid, (gid_t r, gid_t e, gid_t s), r, e, s, (r, e, s))
GOSHIM_SETXID(setgroups, SYS_setgroups, (size_t n, const gid_t* list), n, list, 0, (n, list))

// glibc: seteuid(e) is setresuid(-1, e, -1); EINVAL for -1.
GOSHIM_EXPORT int seteuid(uid_t e) {
  if (e == (uid_t)-1) {
    errno = EINVAL;
    return -1;
  }
  return setresuid((uid_t)-1, e, (uid_t)-1);
}

GOSHIM_EXPORT int setegid(gid_t e) {
  if (e == (gid_t)-1) {
    errno = EINVAL;
    return -1;
  }
  return setresgid((gid_t)-1, e, (gid_t)-1);
}

// glibc's initgroups calls its internal setgroups (which an interposer does
// not see): build the list the same way and set it through goshim.
GOSHIM_EXPORT int initgroups(const char* user, gid_t group) {
  if (!mn_active()) {
    return real::lazy::initgroups()(user, group);
  }
  long max = sysconf(_SC_NGROUPS_MAX);
  int n = max > 0 && max < 65536 ? (int)max : 65536;
  gid_t* groups = (gid_t*)malloc(sizeof(gid_t) * (size_t)n);
  if (!groups) {
    errno = ENOMEM;
    return -1;
  }
  int got = n;
  if (getgrouplist(user, group, groups, &got) < 0) got = n;  // truncated: as glibc, take what fits
  int r = setgroups((size_t)got, groups);
  int e = errno;
  free(groups);
  errno = e;
  return r;
}
