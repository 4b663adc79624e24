/* open() returns the lowest free number, whatever other threads do that
 * opens no file: a daemon that closes 0-2 and opens /dev/null three
 * times relies on getting 0, 1 and 2, and a program that closes every
 * number above 2 relies on nothing being open there afterwards.
 *
 * While the main thread opens, checks and closes, other threads change
 * credentials (setresuid to the same ids: every thread of the process
 * takes part), wait on semaphores in fresh shared mappings (another
 * thread posts them), and make futex system calls on words in fresh
 * mappings (as libstdc++'s atomic waits do). None of that opens a file natively. The main thread
 * always gets 3 from open, and finds 4..63 closed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"

enum { kOpens = 5000, kRounds = 2000, kMappings = 4 };

static atomic_int stop;
static atomic_long cred_rounds, wait_rounds, futex_rounds;  /* progress of the other threads */

static void *cred_changer(void *arg) {
  (void)arg;
  uid_t r, e, s;
  CHECK(getresuid(&r, &e, &s) == 0, "getresuid");
  while (!atomic_load(&stop) && atomic_load(&cred_rounds) < kRounds) {
    CHECK(setresuid(r, e, s) == 0, "setresuid: %s", strerror(errno));
    atomic_fetch_add(&cred_rounds, 1);
  }
  return NULL;
}

struct pair {
  sem_t *ping, *pong;
  int done;  /* set before the last ping */
};

static void *poster(void *arg) {
  struct pair *p = arg;
  for (;;) {
    CHECK(sem_wait(p->ping) == 0, "sem_wait");
    if (p->done) return NULL;
    CHECK(sem_post(p->pong) == 0, "sem_post");
  }
}

/* Waits on semaphores in new shared mappings, again and again: each new
 * mapping is one the waiting side has not seen before. */
static void *waiter(void *arg) {
  (void)arg;
  while (!atomic_load(&stop) && atomic_load(&wait_rounds) < kRounds) {
    sem_t *s = mmap(NULL, kMappings * 2 * sizeof(sem_t), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(s != MAP_FAILED, "mmap");
    struct pair p = {&s[0], &s[1], 0};
    CHECK(sem_init(p.ping, 1, 0) == 0 && sem_init(p.pong, 1, 0) == 0, "sem_init");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, poster, &p) == 0, "create");
    for (int i = 0; i < 8; i++) {
      CHECK(sem_post(p.ping) == 0, "post");
      CHECK(sem_wait(p.pong) == 0, "wait");
    }
    p.done = 1;
    CHECK(sem_post(p.ping) == 0, "post");
    CHECK(pthread_join(t, NULL) == 0, "join");
    munmap(s, kMappings * 2 * sizeof(sem_t));
    atomic_fetch_add(&wait_rounds, 1);
  }
  return NULL;
}

/* FUTEX_WAIT (not private) on a word that does not hold the expected
 * value, in a mapping made for it: EAGAIN at once. */
static void *futex_prober(void *arg) {
  (void)arg;
  while (!atomic_load(&stop) && atomic_load(&futex_rounds) < kRounds) {
    int flags = atomic_load(&futex_rounds) % 2 ? MAP_SHARED : MAP_PRIVATE;
    unsigned *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    CHECK(w != MAP_FAILED, "mmap");
    *w = 0;
    long r = syscall(SYS_futex, w, FUTEX_WAIT, 1, NULL, NULL, 0);
    CHECK(r == -1 && errno == EAGAIN, "futex: %ld %s", r, strerror(errno));
    munmap(w, 4096);
    atomic_fetch_add(&futex_rounds, 1);
  }
  return NULL;
}

int main(void) {
  for (int fd = 3; fd < 64; fd++) close(fd);
  pthread_t c, w, f;
  CHECK(pthread_create(&c, NULL, cred_changer, NULL) == 0, "create");
  CHECK(pthread_create(&w, NULL, waiter, NULL) == 0, "create");
  CHECK(pthread_create(&f, NULL, futex_prober, NULL) == 0, "create");
  /* At least kOpens opens, and on until the other threads have done
   * their kRounds rounds each (so the check does not depend on
   * scheduling). */
  long opens = 0;
  while (opens < kOpens || atomic_load(&cred_rounds) < kRounds ||
         atomic_load(&wait_rounds) < kRounds || atomic_load(&futex_rounds) < kRounds) {
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd >= 0, "open: %s", strerror(errno));
    int others = 0;
    for (int o = 4; o < 64; o++) others += fcntl(o, F_GETFD) != -1;
    CHECK(fd == 3 && others == 0, "open %ld: got fd %d (3 expected), %d fds open in 4..63",
          opens, fd, others);
    close(fd);
    opens++;
  }
  atomic_store(&stop, 1);
  pthread_join(c, NULL);
  pthread_join(w, NULL);
  pthread_join(f, NULL);
  printf("every open got fd 3 and found 4..63 closed, while other threads changed credentials, "
         "waited on shared semaphores and made futex calls in new mappings\n");
  return 0;
}
