/* Sleep calls' arguments and results as glibc and the kernel give them:
 * EINVAL for bad timespecs, clock_nanosleep's returned error codes per
 * clock (errno untouched), zero and past-deadline sleeps, rem untouched on
 * success, and every kind of sleep lasting at least what was asked. */
#include <errno.h>
#include <sched.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static long long ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void) {
  struct timespec ok = {0, 1000}, big = {0, 1000000000}, neg = {-1, 0}, negn = {0, -1};
  struct timespec *bad[3] = {&big, &neg, &negn};
  for (int i = 0; i < 3; i++) {
    errno = 0;
    int r = nanosleep(bad[i], NULL);
    int e = errno;
    printf("nanosleep {%ld, %ld}: %d %s\n", (long)bad[i]->tv_sec, bad[i]->tv_nsec, r,
           e == EINVAL ? "EINVAL" : strerror(e));
  }
  struct clk { clockid_t id; const char *name; } clocks[] = {
      {CLOCK_REALTIME, "REALTIME"}, {CLOCK_MONOTONIC, "MONOTONIC"},
      {CLOCK_BOOTTIME, "BOOTTIME"}, {CLOCK_TAI, "TAI"},
      {CLOCK_MONOTONIC_RAW, "MONOTONIC_RAW"}, {CLOCK_REALTIME_COARSE, "REALTIME_COARSE"},
      {CLOCK_THREAD_CPUTIME_ID, "THREAD_CPUTIME"}, {99, "99"}, {-1, "-1"}};
  for (unsigned i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
    errno = 1234;
    int a = clock_nanosleep(clocks[i].id, 0, &ok, NULL);
    int b = clock_nanosleep(clocks[i].id, 0, &big, NULL);
    int c = clock_nanosleep(clocks[i].id, 0, &neg, NULL);
    int d = clock_nanosleep(clocks[i].id, TIMER_ABSTIME, &ok, NULL);  /* long past */
    printf("clock_nanosleep %-16s ok=%d bad=%d neg=%d abs_past=%d errno_kept=%d\n", clocks[i].name,
           a, b, c, d, errno == 1234);
  }
  struct timespec zero = {0, 0}, rem = {77, 77};
  printf("nanosleep 0: %d, rem untouched %d\n", nanosleep(&zero, &rem), rem.tv_sec == 77);
  rem.tv_sec = 77;
  printf("nanosleep 1us: %d, rem untouched %d\n", nanosleep(&ok, &rem), rem.tv_sec == 77);
  printf("usleep 0: %d, sleep 0: %u, sched_yield: %d, thrd_sleep: %d\n", usleep(0), sleep(0),
         sched_yield(), thrd_sleep(&ok, NULL));
  errno = 0;
  int ur = usleep(1000000);
  printf("usleep 1000000: %d %d\n", ur, errno);

  /* None ends early, on the clock it sleeps on. */
  long long want = 30 * 1000000LL;
  struct timespec req = {0, want};
  int early = 0;
  long long t0 = ns(CLOCK_MONOTONIC);
  usleep(30000);
  early += ns(CLOCK_MONOTONIC) - t0 < want;
  t0 = ns(CLOCK_MONOTONIC);
  nanosleep(&req, NULL);
  early += ns(CLOCK_MONOTONIC) - t0 < want;
  t0 = ns(CLOCK_MONOTONIC);
  clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
  early += ns(CLOCK_MONOTONIC) - t0 < want;
  t0 = ns(CLOCK_REALTIME);
  clock_nanosleep(CLOCK_REALTIME, 0, &req, NULL);
  early += ns(CLOCK_REALTIME) - t0 < want;
  t0 = ns(CLOCK_REALTIME);
  long long until = t0 + want;
  struct timespec abs = {until / 1000000000, until % 1000000000};
  clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &abs, NULL);
  early += ns(CLOCK_REALTIME) < until;
  t0 = ns(CLOCK_MONOTONIC);
  until = t0 + want;
  abs.tv_sec = until / 1000000000;
  abs.tv_nsec = until % 1000000000;
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
  early += ns(CLOCK_MONOTONIC) < until;
  t0 = ns(CLOCK_BOOTTIME);
  clock_nanosleep(CLOCK_BOOTTIME, 0, &req, NULL);
  early += ns(CLOCK_BOOTTIME) - t0 < want;
  t0 = ns(CLOCK_MONOTONIC);
  thrd_sleep(&req, NULL);
  early += ns(CLOCK_MONOTONIC) - t0 < want;
  t0 = ns(CLOCK_MONOTONIC);
  sleep(1);
  early += ns(CLOCK_MONOTONIC) - t0 < 1000000000LL;
  printf("sleeps that ended early: %d\n", early);
  return 0;
}
