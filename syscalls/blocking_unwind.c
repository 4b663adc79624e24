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
