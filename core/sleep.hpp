// Sleeps on the timer heap: a sleeping G parks with WaitKind::Sleep and a
// timer, holding no M (sleep, usleep, nanosleep, clock_nanosleep).
#pragma once

#include <stdint.h>
#include <time.h>

namespace goshim {

// On user G. Sleeps until deadline (monotonic ns). Returns 0 when the time
// has come (never earlier), or EINTR when a signal interrupted the sleep;
// then *left receives the time still to sleep (ns, >= 0). A sleep is never
// restarted after a handler, with or without SA_RESTART (as on Linux).
int sleep_until(int64_t deadline, int64_t* left);

// Converts a clock_nanosleep request to a monotonic deadline. Handles
// CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME and CLOCK_TAI, relative
// or TIMER_ABSTIME (absolute times of the other clocks are converted at the
// call; later clock jumps are not followed). Returns false for clocks
// goshim does not serve (the caller passes those to the kernel). The
// timespec must already be valid.
bool sleep_deadline(clockid_t clk, int flags, const struct timespec* req, int64_t* deadline);

}  // namespace goshim
