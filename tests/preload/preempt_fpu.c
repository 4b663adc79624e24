/* Floating-point and vector state survive preemption exactly: threads with
 * different rounding modes and MXCSR flags run long AVX and x87
 * computations, switched out many times, and must produce bit-identical
 * results to the same computation done before any thread started. */
#include <fenv.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "common.h"

#define N 4
#define ITERS 30000000L

struct result {
  double v[4];
  long double x87;
  unsigned mxcsr;
};

__attribute__((target("avx2,fma"), noinline)) static void compute(int id, struct result *r) {
  static const int modes[4] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  fesetround(modes[id % 4]);
  if (id == 3) _mm_setcsr(_mm_getcsr() | 0x8040); /* flush-to-zero, denormals-are-zero */
  __m256d a = _mm256_set_pd(1.0 + id, 1.1, 1.2, 1.3);
  __m256d b = _mm256_set1_pd(1.0000001);
  __m256d c = _mm256_set1_pd(1e-9 * (id + 1));
  __m256d d = _mm256_setzero_pd();
  long double x = 1.0L + id;
  for (long i = 0; i < ITERS; i++) {
    a = _mm256_fmadd_pd(a, b, c);
    d = _mm256_add_pd(d, _mm256_div_pd(c, a));
    x = x * 1.0000000001L + 1e-12L;
    if ((i & 0xfffff) == 0) { /* keep values bounded */
      a = _mm256_sqrt_pd(a);
      x = x / (long double)(1 + (i >> 20));
    }
  }
  _mm256_storeu_pd(r->v, _mm256_add_pd(a, d));
  r->x87 = x;
  r->mxcsr = _mm_getcsr();
  fesetround(FE_TONEAREST);
  _mm_setcsr(0x1f80);
}

static struct result want[N], got[N];

static void *worker(void *arg) {
  int id = (int)(long)arg;
  compute(id, &got[id]);
  return NULL;
}

int main(void) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "SKIP: the CPU has no AVX2/FMA\n");
    return 77;
  }
  for (int i = 0; i < N; i++) compute(i, &want[i]);
  pthread_t t[N];
  for (long i = 0; i < N; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  for (int i = 0; i < N; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < N; i++) {
    CHECK(memcmp(want[i].v, got[i].v, sizeof want[i].v) == 0, "thread %d: vector results differ", i);
    CHECK(want[i].x87 == got[i].x87, "thread %d: x87 result differs", i);
    CHECK_EQ(want[i].mxcsr, got[i].mxcsr);
  }
  printf("vector, x87 and MXCSR state identical in %d threads\n", N);
  return 0;
}
