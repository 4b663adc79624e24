/* A program with its own SIGURG handler (the signal goshim uses for
 * preemption by default) still gets every SIGURG it raises, while
 * CPU-bound threads are being preempted around it. */
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include "common.h"

static volatile sig_atomic_t handled;
static volatile int stop;

static void on_urg(int sig) { handled++; }

static void *spin(void *arg) {
  unsigned long c = 0;
  while (!stop) c++;
  return (void *)c;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_urg;
  sigemptyset(&sa.sa_mask);
  CHECK_EQ(sigaction(SIGURG, &sa, NULL), 0);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&t[i], NULL, spin, NULL), 0);
  for (int i = 0; i < 200; i++) {
    int before = handled;
    CHECK_EQ(pthread_kill(pthread_self(), SIGURG), 0);
    CHECK(handled == before + 1, "SIGURG %d not handled", i);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  stop = 1;
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  struct sigaction cur;
  CHECK_EQ(sigaction(SIGURG, NULL, &cur), 0);
  CHECK(cur.sa_handler == on_urg, "sigaction does not report the program's handler");
  printf("the program's SIGURG handler ran %d times\n", (int)handled);
  return 0;
}
