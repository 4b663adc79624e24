/* The frame that leaves a blocking section when glibc's cancellation
 * unwinds through it (syscalls/blocking.hpp, blocking_cancellable).
 *
 * C with -fexceptions: the cleanup attribute runs during forced unwinding
 * with libgcc's C personality (no libstdc++ needed). No exception is ever
 * thrown by goshim. */
void goshim_exit_blocking_for_unwind(void); /* syscalls/blocking.cpp */

static void leave_on_unwind(int *armed) {
  if (*armed) goshim_exit_blocking_for_unwind();
}

__attribute__((visibility("hidden"))) void goshim_call_unwind_guarded(void (*fn)(void *),
                                                                      void *ctx) {
  int armed __attribute__((cleanup(leave_on_unwind))) = 1;
  fn(ctx);
  armed = 0;
}

/* Runs fn(ctx); if glibc's cancellation unwinds through it, runs
 * cleanup(cctx) on the way (syscalls/blocking.hpp, call_undo_on_unwind). */
struct undo {
  void (*cleanup)(void *);
  void *cctx;
  int armed;
};

static void undo_on_unwind(struct undo *u) {
  if (u->armed) u->cleanup(u->cctx);
}

__attribute__((visibility("hidden"))) long goshim_call_undo_on_unwind(long (*fn)(void *), void *ctx,
                                                                      void (*cleanup)(void *),
                                                                      void *cctx) {
  struct undo u __attribute__((cleanup(undo_on_unwind))) = {cleanup, cctx, 1};
  long r = fn(ctx);
  u.armed = 0;
  return r;
}
