/* Runs a pthread_once routine so that, if glibc's forced unwinding
 * (pthread_exit, cancellation) passes through it, the once control goes
 * back to "not run" and waiters retry (POSIX: a cancelled init routine is
 * as if pthread_once was never called).
 *
 * C with -fexceptions: the cleanup attribute then runs during unwinding,
 * with libgcc's C personality (no libstdc++ needed). No exception is ever
 * thrown by goshim. */
#include <stddef.h>

void goshim_once_reset(int *once); /* shim/pthread_once.cpp */

static void reset_on_unwind(int **p) {
  if (*p) goshim_once_reset(*p);
}

__attribute__((visibility("hidden"))) void goshim_once_run(int *once, void (*routine)(void)) {
  int *guard __attribute__((cleanup(reset_on_unwind))) = once;
  routine();
  guard = NULL;
}
