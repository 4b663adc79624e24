/* Floating-point and vector state survive preemption exactly: threads with
 * different rounding modes and MXCSR flags run long AVX and x87
 * computations (aarch64: NEON, quad long double, FPCR), switched out many
 * times, and must produce bit-identical results to the same computation
 * done before any thread started. */
#include <fenv.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "common.h"

#define N 4

#if defined(__x86_64__)
#include <immintrin.h>
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

#elif defined(__aarch64__)
/* aarch64: NEON FMA/divide/sqrt in v registers, a long double (IEEE quad,
 * computed in software) and FPCR (rounding mode, flush-to-zero). Fewer
 * iterations: this runs under emulation. */
#include <arm_neon.h>
#define ITERS 3000000L

struct result {
  double v[4];
  long double x87;
  unsigned long mxcsr; /* FPCR */
};

static unsigned long get_fpcr(void) {
  unsigned long v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
static void set_fpcr(unsigned long v) { __asm__ volatile("msr fpcr, %0" ::"r"(v)); }

__attribute__((noinline)) static void compute(int id, struct result *r) {
  static const int modes[4] = {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO};
  fesetround(modes[id % 4]);
  if (id == 3) set_fpcr(get_fpcr() | (1ul << 24)); /* flush-to-zero */
  float64x2_t a0 = {1.0 + id, 1.1}, a1 = {1.2, 1.3};
  float64x2_t b = vdupq_n_f64(1.0000001);
  float64x2_t c = vdupq_n_f64(1e-9 * (id + 1));
  float64x2_t d0 = vdupq_n_f64(0), d1 = vdupq_n_f64(0);
  long double x = 1.0L + id;
  for (long i = 0; i < ITERS; i++) {
    a0 = vfmaq_f64(c, a0, b);
    a1 = vfmaq_f64(c, a1, b);
    d0 = vaddq_f64(d0, vdivq_f64(c, a0));
    d1 = vaddq_f64(d1, vdivq_f64(c, a1));
    if ((i & 0x3ff) == 0) x = x * 1.0000000001L + 1e-12L;
    if ((i & 0xfffff) == 0) { /* keep values bounded */
      a0 = vsqrtq_f64(a0);
      a1 = vsqrtq_f64(a1);
      x = x / (long double)(1 + (i >> 20));
    }
  }
  vst1q_f64(r->v, vaddq_f64(a0, d0));
  vst1q_f64(r->v + 2, vaddq_f64(a1, d1));
  r->x87 = x;
  r->mxcsr = get_fpcr();
  fesetround(FE_TONEAREST);
  set_fpcr(0);
}
#endif

static struct result want[N], got[N];

static void *worker(void *arg) {
  int id = (int)(long)arg;
  compute(id, &got[id]);
  return NULL;
}

int main(void) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "SKIP: the CPU has no AVX2/FMA\n");
    return 77;
  }
#endif
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
