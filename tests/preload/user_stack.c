/* pthread_attr_setstack (a stack the program supplies), stack and guard
 * sizes, and what pthread_getattr_np reports. */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "common.h"

static char *ustack;
#define USIZE (256 * 1024)

static void *on_user_stack(void *arg) {
  char here;
  CHECK((char *)&here >= ustack && (char *)&here < ustack + USIZE, "not on the supplied stack");
  pthread_attr_t a;
  CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
  void *addr;
  size_t size;
  CHECK_EQ(pthread_attr_getstack(&a, &addr, &size), 0);
  CHECK((char *)addr <= &here && &here < (char *)addr + size, "getattr_np stack does not hold us");
  pthread_attr_destroy(&a);
  return (void *)1;
}

static void *sized(void *arg) {
  size_t want = (size_t)arg;
  pthread_attr_t a;
  CHECK_EQ(pthread_getattr_np(pthread_self(), &a), 0);
  size_t size, guard;
  void *addr;
  pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_getguardsize(&a, &guard);
  pthread_attr_destroy(&a);
  char here;
  CHECK((char *)addr <= &here && &here < (char *)addr + size, "not on the reported stack");
  CHECK(size >= want, "stack %zu smaller than asked %zu", size, want);
  /* use most of it */
  volatile char big[want / 2];
  big[0] = 1;
  big[want / 2 - 1] = 2;
  return (void *)guard;
}

int main(void) {
  ustack = mmap(NULL, USIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(ustack != MAP_FAILED, "mmap");
  pthread_attr_t a;
  pthread_attr_init(&a);
  CHECK_EQ(pthread_attr_setstack(&a, ustack, USIZE), 0);
  void *got;
  size_t gs;
  pthread_attr_getstack(&a, &got, &gs);
  CHECK(got == ustack && gs == USIZE, "getstack returns what setstack set");
  pthread_t t;
  void *r;
  CHECK_EQ(pthread_create(&t, &a, on_user_stack, NULL), 0);
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK_EQ((long)r, 1);
  pthread_attr_destroy(&a);

  size_t sizes[] = {64 * 1024, 1024 * 1024, 16 * 1024 * 1024};
  for (int i = 0; i < 3; i++) {
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, sizes[i]);
    pthread_attr_setguardsize(&a, 3 * 4096);
    CHECK_EQ(pthread_create(&t, &a, sized, (void *)sizes[i]), 0);
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK((size_t)r >= 3 * 4096, "guard size %zu", (size_t)r);
    pthread_attr_destroy(&a);
  }
  /* the default stack size is glibc's: RLIMIT_STACK */
  struct rlimit rl;
  getrlimit(RLIMIT_STACK, &rl);
  pthread_attr_init(&a);
  size_t dflt;
  pthread_attr_getstacksize(&a, &dflt);
  CHECK(rl.rlim_cur == RLIM_INFINITY || dflt == rl.rlim_cur, "default %zu vs rlimit %lu", dflt,
        (unsigned long)rl.rlim_cur);
  printf("user stack and sized stacks ok; default stack size %zu\n", dflt);
  return 0;
}
