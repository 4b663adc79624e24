/* A new thread starts with its creator's floating-point control state (the
 * rounding mode; on x86-64 also MXCSR's flush-to-zero and
 * denormals-are-zero bits), whatever state the thread that ran before it
 * in the same memory had: threads created one at a time while the creator
 * changes its state every round (each may reuse the last one's stack and
 * descriptor), waves of threads per state, and two creators with different
 * states creating at the same time. */
#include <fenv.h>
#include <pthread.h>
#include "common.h"
#if defined(__x86_64__)
#include <immintrin.h>
#define CSR_BITS 0x8040u /* flush-to-zero, denormals-are-zero */
static unsigned csr_get(void) { return _mm_getcsr() & CSR_BITS; }
static void csr_set(unsigned bits) { _mm_setcsr((_mm_getcsr() & ~CSR_BITS) | bits); }
#else
static unsigned csr_get(void) { return 0; }
static void csr_set(unsigned bits) { (void)bits; }
#endif

static const int modes[4] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};

/* What the thread starts with: rounding mode and CSR bits in one value. */
static long state_now(void) { return (long)fegetround() | ((long)csr_get() << 16); }

static void state_set(int r) {
  CHECK_EQ(fesetround(modes[r % 4]), 0);
  csr_set((r / 4) % 2 ? 0x8040u : 0);
}

static void *report(void *arg) {
  (void)arg;
  return (void *)state_now();
}

static long checks;

static void create_check(int round) {
  pthread_t t;
  void *r;
  long want = state_now();
  CHECK_EQ(pthread_create(&t, NULL, report, NULL), 0);
  CHECK_EQ(pthread_join(t, &r), 0);
  CHECK((long)r == want, "round %d: the thread started with state %#lx, its creator had %#lx",
        round, (long)r, want);
  __atomic_fetch_add(&checks, 1, __ATOMIC_RELAXED);
}

/* A creator of its own: creates and checks children in its own state. */
static void *creator(void *arg) {
  int base = (int)(long)arg;
  for (int i = 0; i < 300; i++) {
    state_set(base + 2 * (i % 4));
    create_check(i);
  }
  return NULL;
}

int main(void) {
  /* one at a time, a new state every round */
  for (int r = 0; r < 400; r++) {
    state_set(r);
    create_check(r);
  }
  /* waves of 50 per state */
  for (int w = 0; w < 40; w++) {
    state_set(w);
    pthread_t t[50];
    long want = state_now();
    for (int i = 0; i < 50; i++) CHECK_EQ(pthread_create(&t[i], NULL, report, NULL), 0);
    for (int i = 0; i < 50; i++) {
      void *r;
      CHECK_EQ(pthread_join(t[i], &r), 0);
      CHECK((long)r == want, "wave %d, thread %d: started with state %#lx, its creator had %#lx",
            w, i, (long)r, want);
      checks++;
    }
  }
  /* two creators in different states at the same time */
  state_set(0);
  pthread_t c[2];
  for (long i = 0; i < 2; i++) CHECK_EQ(pthread_create(&c[i], NULL, creator, (void *)i), 0);
  for (int i = 0; i < 2; i++) CHECK_EQ(pthread_join(c[i], NULL), 0);
  state_set(0);
  printf("%ld threads started in their creator's floating-point state\n", checks);
  return 0;
}
