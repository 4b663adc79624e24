/* glibc's error codes and static initializers for every synchronization
 * object: mutexes of every kind (EBUSY, EDEADLK, EPERM, EINVAL,
 * ETIMEDOUT, EAGAIN on recursion overflow), the attribute calls,
 * priority-inherit and priority-protect mutexes (prioceilings), condition
 * variables, rwlocks, barriers, spinlocks and semaphores. Output must be
 * identical natively and under goshim. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include <time.h>
#include "common.h"

static pthread_mutex_t m_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_err = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_adapt = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_cond_t c_static = PTHREAD_COND_INITIALIZER;
static pthread_rwlock_t rw_static = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t rw_wnr = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;

static struct timespec in_ms(clockid_t clk, long ms) {
  struct timespec ts;
  clock_gettime(clk, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

static pthread_mutex_t *other_target;
static int other_result;
static void *other_thread(void *arg) {
  int op = (int)(long)arg;
  if (op == 0) other_result = pthread_mutex_trylock(other_target);
  if (op == 1) other_result = pthread_mutex_unlock(other_target);
  if (op == 2) {
    struct timespec ts = in_ms(CLOCK_REALTIME, 30);
    other_result = pthread_mutex_timedlock(other_target, &ts);
  }
  if (op == 3) {
    struct timespec ts = in_ms(CLOCK_MONOTONIC, 30);
    other_result = pthread_mutex_clocklock(other_target, CLOCK_MONOTONIC, &ts);
  }
  return NULL;
}

static int in_other(pthread_mutex_t *m, int op) {
  pthread_t t;
  other_target = m;
  pthread_create(&t, NULL, other_thread, (void *)(long)op);
  pthread_join(t, NULL);
  return other_result;
}

static void mutex_kinds(void) {
  struct timespec bad = {0, 1000000000}, past = {0, 0}, neg = {-1, 0};
  /* normal (static) */
  CHECK_EQ(pthread_mutex_lock(&m_normal), 0);
  CHECK_EQ(pthread_mutex_trylock(&m_normal), EBUSY);
  CHECK_EQ(in_other(&m_normal, 0), EBUSY);
  CHECK_EQ(in_other(&m_normal, 2), ETIMEDOUT);
  CHECK_EQ(in_other(&m_normal, 3), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_timedlock(&m_normal, &bad), EINVAL); /* must block: checked */
  CHECK_EQ(pthread_mutex_timedlock(&m_normal, &past), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_timedlock(&m_normal, &neg), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_clocklock(&m_normal, CLOCK_PROCESS_CPUTIME_ID, &past), EINVAL);
  CHECK_EQ(pthread_mutex_destroy(&m_normal), EBUSY);
  CHECK_EQ(pthread_mutex_unlock(&m_normal), 0);
  CHECK_EQ(pthread_mutex_timedlock(&m_normal, &bad), 0); /* free: not checked */
  CHECK_EQ(pthread_mutex_unlock(&m_normal), 0);
  CHECK_EQ(pthread_mutex_destroy(&m_normal), 0);
  CHECK_EQ(pthread_mutex_lock(&m_normal), EINVAL); /* destroyed */
  CHECK_EQ(pthread_mutex_init(&m_normal, NULL), 0);
  printf("normal: ok\n");

  /* recursive (static) */
  CHECK_EQ(pthread_mutex_lock(&m_rec), 0);
  CHECK_EQ(pthread_mutex_lock(&m_rec), 0);
  CHECK_EQ(pthread_mutex_trylock(&m_rec), 0);
  CHECK_EQ(m_rec.__data.__count, 3);
  CHECK_EQ(in_other(&m_rec, 1), EPERM);
  CHECK_EQ(in_other(&m_rec, 0), EBUSY);
  m_rec.__data.__count = UINT_MAX; /* as if locked 2^32-1 times */
  CHECK_EQ(pthread_mutex_lock(&m_rec), EAGAIN);
  CHECK_EQ(pthread_mutex_trylock(&m_rec), EAGAIN);
  m_rec.__data.__count = 1;
  CHECK_EQ(pthread_mutex_unlock(&m_rec), 0);
  CHECK_EQ(pthread_mutex_unlock(&m_rec), EPERM);
  printf("recursive: ok\n");

  /* errorcheck (static) */
  CHECK_EQ(pthread_mutex_unlock(&m_err), EPERM);
  CHECK_EQ(pthread_mutex_lock(&m_err), 0);
  CHECK_EQ(pthread_mutex_lock(&m_err), EDEADLK);
  CHECK_EQ(pthread_mutex_trylock(&m_err), EBUSY);
  CHECK_EQ(pthread_mutex_timedlock(&m_err, &past), EDEADLK);
  CHECK_EQ(in_other(&m_err, 1), EPERM);
  CHECK_EQ(in_other(&m_err, 2), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_unlock(&m_err), 0);
  CHECK_EQ(pthread_mutex_unlock(&m_err), EPERM);
  printf("errorcheck: ok\n");

  /* adaptive (static) */
  CHECK_EQ(pthread_mutex_lock(&m_adapt), 0);
  CHECK_EQ(pthread_mutex_trylock(&m_adapt), EBUSY);
  CHECK_EQ(in_other(&m_adapt, 2), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_unlock(&m_adapt), 0);
  printf("adaptive: ok\n");
}

static void mutexattrs(void) {
  pthread_mutexattr_t a;
  int v;
  CHECK_EQ(pthread_mutexattr_init(&a), 0);
  CHECK_EQ(pthread_mutexattr_gettype(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_MUTEX_NORMAL);
  CHECK_EQ(pthread_mutexattr_settype(&a, 42), EINVAL);
  CHECK_EQ(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE), 0);
  CHECK_EQ(pthread_mutexattr_gettype(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_MUTEX_RECURSIVE);
  CHECK_EQ(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL), 0);
  CHECK_EQ(pthread_mutexattr_gettype(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_MUTEX_NORMAL);
  CHECK_EQ(pthread_mutexattr_setpshared(&a, 7), EINVAL);
  CHECK_EQ(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
  CHECK_EQ(pthread_mutexattr_getpshared(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_PROCESS_SHARED);
  CHECK_EQ(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_PRIVATE), 0);
  CHECK_EQ(pthread_mutexattr_setrobust(&a, 9), EINVAL);
  CHECK_EQ(pthread_mutexattr_getrobust(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_MUTEX_STALLED);
  CHECK_EQ(pthread_mutexattr_setprotocol(&a, 9), EINVAL);
  CHECK_EQ(pthread_mutexattr_getprotocol(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_PRIO_NONE);
  int lo = sched_get_priority_min(SCHED_FIFO), hi = sched_get_priority_max(SCHED_FIFO);
  CHECK_EQ(pthread_mutexattr_getprioceiling(&a, &v), 0);
  CHECK_EQ(v, lo);
  CHECK_EQ(pthread_mutexattr_setprioceiling(&a, hi + 1), EINVAL);
  CHECK_EQ(pthread_mutexattr_setprioceiling(&a, lo - 1), EINVAL);
  CHECK_EQ(pthread_mutexattr_setprioceiling(&a, 10), 0);
  CHECK_EQ(pthread_mutexattr_getprioceiling(&a, &v), 0);
  CHECK_EQ(v, 10);
  /* robust + priority protect: not supported */
  CHECK_EQ(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), 0);
  CHECK_EQ(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_PROTECT), 0);
  pthread_mutex_t m;
  CHECK_EQ(pthread_mutex_init(&m, &a), ENOTSUP);
  CHECK_EQ(pthread_mutexattr_destroy(&a), 0);
  printf("mutexattr: ok\n");
}

static void pi_pp(void) {
  pthread_mutexattr_t a;
  pthread_mutex_t m;
  int v;
  /* priority inherit: a correct (errorcheck) mutex */
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  CHECK_EQ(pthread_mutex_init(&m, &a), 0);
  CHECK_EQ(pthread_mutex_getprioceiling(&m, &v), EINVAL);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(pthread_mutex_lock(&m), EDEADLK);
  CHECK_EQ(pthread_mutex_trylock(&m), EDEADLK);
  CHECK_EQ(in_other(&m, 0), EBUSY);
  CHECK_EQ(in_other(&m, 1), EPERM);
  CHECK_EQ(in_other(&m, 2), ETIMEDOUT);
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), EPERM);
  CHECK_EQ(pthread_mutex_destroy(&m), 0);
  /* priority inherit, recursive */
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  CHECK_EQ(pthread_mutex_init(&m, &a), 0);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(in_other(&m, 1), EPERM);
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), EPERM);
  pthread_mutex_destroy(&m);
  printf("priority inherit: ok\n");
}

/* Priority protect. glibc raises the caller to the ceiling, which fails
 * (EINVAL) for a SCHED_OTHER thread: run this part in a SCHED_FIFO thread
 * of priority 10, which glibc boosts and goshim records. */
static void *pp_thread(void *arg) {
  pthread_mutexattr_t a;
  pthread_mutex_t m;
  int v;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_PROTECT);
  pthread_mutexattr_setprioceiling(&a, 20);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  CHECK_EQ(pthread_mutex_init(&m, &a), 0);
  CHECK_EQ(pthread_mutex_getprioceiling(&m, &v), 0);
  CHECK_EQ(v, 20);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(pthread_mutex_lock(&m), EDEADLK);
  CHECK_EQ(pthread_mutex_trylock(&m), EDEADLK);
  CHECK_EQ(in_other(&m, 0), EBUSY);
  CHECK_EQ(in_other(&m, 1), EPERM);
  CHECK_EQ(in_other(&m, 2), ETIMEDOUT);
  int old = 0;
  CHECK_EQ(pthread_mutex_setprioceiling(&m, 30, &old), EDEADLK); /* errorcheck owner */
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), EPERM);
  CHECK_EQ(pthread_mutex_setprioceiling(&m, 1000, &old), EINVAL);
  CHECK_EQ(pthread_mutex_setprioceiling(&m, 30, &old), 0);
  CHECK_EQ(old, 20);
  CHECK_EQ(pthread_mutex_getprioceiling(&m, &v), 0);
  CHECK_EQ(v, 30);
  CHECK_EQ(pthread_mutex_lock(&m), 0); /* still usable: setprioceiling left it unlocked */
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  pthread_mutex_destroy(&m);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  CHECK_EQ(pthread_mutex_init(&m, &a), 0);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(pthread_mutex_setprioceiling(&m, 25, &old), 0); /* the owner may change it */
  CHECK_EQ(old, 20);
  CHECK_EQ(pthread_mutex_lock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_unlock(&m), 0);
  CHECK_EQ(pthread_mutex_getprioceiling(&m, &v), 0);
  CHECK_EQ(v, 25);
  pthread_mutex_destroy(&m);
  pthread_mutex_init(&m, NULL);
  CHECK_EQ(pthread_mutex_setprioceiling(&m, 30, &old), EINVAL); /* not a PP mutex */
  /* the caller's priority above the ceiling */
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
  pthread_mutexattr_setprioceiling(&a, 5);
  CHECK_EQ(pthread_mutex_init(&m, &a), 0);
  CHECK_EQ(pthread_mutex_lock(&m), EINVAL);
  CHECK_EQ(pthread_mutex_trylock(&m), EINVAL);
  return arg;
}

static void pp(void) {
  pthread_attr_t at;
  struct sched_param sp = {.sched_priority = 10};
  pthread_attr_init(&at);
  pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&at, SCHED_FIFO);
  pthread_attr_setschedparam(&at, &sp);
  pthread_t t;
  int r = pthread_create(&t, &at, pp_thread, NULL);
  if (r == 0) pthread_join(t, NULL);
  else CHECK_EQ(r, EPERM); /* no right to real-time scheduling: nothing to test */
  printf("priority protect: ok\n");
}

static void conds(void) {
  pthread_condattr_t a;
  clockid_t clk;
  int v;
  CHECK_EQ(pthread_condattr_init(&a), 0);
  CHECK_EQ(pthread_condattr_getclock(&a, &clk), 0);
  CHECK_EQ(clk, CLOCK_REALTIME);
  CHECK_EQ(pthread_condattr_setclock(&a, CLOCK_PROCESS_CPUTIME_ID), EINVAL);
  CHECK_EQ(pthread_condattr_setclock(&a, CLOCK_MONOTONIC), 0);
  CHECK_EQ(pthread_condattr_getclock(&a, &clk), 0);
  CHECK_EQ(clk, CLOCK_MONOTONIC);
  CHECK_EQ(pthread_condattr_setpshared(&a, 5), EINVAL);
  CHECK_EQ(pthread_condattr_getpshared(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_PROCESS_PRIVATE);
  pthread_cond_t c;
  CHECK_EQ(pthread_cond_init(&c, &a), 0);
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&m);
  struct timespec bad = {0, -1};
  CHECK_EQ(pthread_cond_timedwait(&c, &m, &bad), EINVAL);
  struct timespec ts = in_ms(CLOCK_MONOTONIC, 20); /* the condvar's clock */
  CHECK_EQ(pthread_cond_timedwait(&c, &m, &ts), ETIMEDOUT);
  ts = in_ms(CLOCK_REALTIME, 20);
  CHECK_EQ(pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &ts), ETIMEDOUT);
  CHECK_EQ(pthread_cond_clockwait(&c, &m, CLOCK_THREAD_CPUTIME_ID, &ts), EINVAL);
  struct timespec past = {1, 0};
  CHECK_EQ(pthread_cond_timedwait(&c_static, &m, &past), ETIMEDOUT);
  CHECK_EQ(pthread_cond_signal(&c_static), 0);   /* nobody waits */
  CHECK_EQ(pthread_cond_broadcast(&c_static), 0);
  pthread_mutex_unlock(&m);
  /* waiting with an errorcheck mutex we do not hold */
  pthread_mutex_t e = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
  CHECK_EQ(pthread_cond_wait(&c, &e), EPERM);
  CHECK_EQ(pthread_cond_destroy(&c), 0);
  CHECK_EQ(pthread_cond_destroy(&c_static), 0);
  printf("cond: ok\n");
}

static void *rdlocker(void *arg) {
  pthread_rwlock_t *rw = arg;
  return (void *)(long)pthread_rwlock_tryrdlock(rw);
}

static void rwlocks(void) {
  pthread_rwlockattr_t a;
  int v;
  CHECK_EQ(pthread_rwlockattr_init(&a), 0);
  CHECK_EQ(pthread_rwlockattr_getkind_np(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_RWLOCK_PREFER_READER_NP);
  CHECK_EQ(pthread_rwlockattr_setkind_np(&a, 7), EINVAL);
  CHECK_EQ(pthread_rwlockattr_setpshared(&a, 7), EINVAL);
  CHECK_EQ(pthread_rwlockattr_getpshared(&a, &v), 0);
  CHECK_EQ(v, PTHREAD_PROCESS_PRIVATE);
  struct timespec past = {0, 0}, bad = {0, 1000000000};
  pthread_rwlock_t *locks[2] = {&rw_static, &rw_wnr};
  for (int i = 0; i < 2; i++) {
    pthread_rwlock_t *rw = locks[i];
    CHECK_EQ(pthread_rwlock_wrlock(rw), 0);
    CHECK_EQ(pthread_rwlock_wrlock(rw), EDEADLK);
    CHECK_EQ(pthread_rwlock_rdlock(rw), EDEADLK);
    CHECK_EQ(pthread_rwlock_trywrlock(rw), EBUSY);
    CHECK_EQ(pthread_rwlock_timedwrlock(rw, &past), EDEADLK);
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, rdlocker, rw);
    pthread_join(t, &r);
    CHECK_EQ((long)r, EBUSY);
    CHECK_EQ(pthread_rwlock_unlock(rw), 0);
    CHECK_EQ(pthread_rwlock_rdlock(rw), 0);
    CHECK_EQ(pthread_rwlock_rdlock(rw), 0); /* recursive read */
    CHECK_EQ(pthread_rwlock_trywrlock(rw), EBUSY);
    CHECK_EQ(pthread_rwlock_timedwrlock(rw, &past), ETIMEDOUT);
    CHECK_EQ(pthread_rwlock_timedwrlock(rw, &bad), EINVAL);
    struct timespec ts = in_ms(CLOCK_MONOTONIC, 20);
    CHECK_EQ(pthread_rwlock_clockwrlock(rw, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    CHECK_EQ(pthread_rwlock_clockwrlock(rw, CLOCK_PROCESS_CPUTIME_ID, &ts), EINVAL);
    CHECK_EQ(pthread_rwlock_unlock(rw), 0);
    CHECK_EQ(pthread_rwlock_unlock(rw), 0);
    CHECK_EQ(pthread_rwlock_wrlock(rw), 0);
    CHECK_EQ(pthread_rwlock_timedrdlock(rw, &past), EDEADLK);
    CHECK_EQ(pthread_rwlock_unlock(rw), 0);
    CHECK_EQ(pthread_rwlock_destroy(rw), 0);
  }
  printf("rwlock: ok\n");
}

static void others(void) {
  pthread_barrier_t b;
  pthread_barrierattr_t ba;
  int v;
  CHECK_EQ(pthread_barrier_init(&b, NULL, 0), EINVAL);
  CHECK_EQ(pthread_barrierattr_init(&ba), 0);
  CHECK_EQ(pthread_barrierattr_setpshared(&ba, 9), EINVAL);
  CHECK_EQ(pthread_barrierattr_getpshared(&ba, &v), 0);
  CHECK_EQ(v, PTHREAD_PROCESS_PRIVATE);
  CHECK_EQ(pthread_barrier_init(&b, &ba, 1), 0);
  CHECK_EQ(pthread_barrier_wait(&b), PTHREAD_BARRIER_SERIAL_THREAD);
  CHECK_EQ(pthread_barrier_wait(&b), PTHREAD_BARRIER_SERIAL_THREAD);
  CHECK_EQ(pthread_barrier_destroy(&b), 0);
  printf("barrier: ok\n");

  pthread_spinlock_t s;
  CHECK_EQ(pthread_spin_init(&s, PTHREAD_PROCESS_PRIVATE), 0);
  CHECK_EQ(pthread_spin_lock(&s), 0);
  CHECK_EQ(pthread_spin_trylock(&s), EBUSY);
  CHECK_EQ(pthread_spin_unlock(&s), 0);
  CHECK_EQ(pthread_spin_trylock(&s), 0);
  CHECK_EQ(pthread_spin_unlock(&s), 0);
  CHECK_EQ(pthread_spin_destroy(&s), 0);
  printf("spin: ok\n");

  sem_t sem;
  CHECK_EQ(sem_init(&sem, 0, (unsigned)SEM_VALUE_MAX + 1), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(sem_init(&sem, 0, 1), 0);
  CHECK_EQ(sem_trywait(&sem), 0);
  errno = 0;
  CHECK_EQ(sem_trywait(&sem), -1);
  CHECK_EQ(errno, EAGAIN);
  struct timespec past = {0, 0}, bad = {0, -5};
  CHECK_EQ(sem_timedwait(&sem, &past), -1);
  CHECK_EQ(errno, ETIMEDOUT);
  CHECK_EQ(sem_timedwait(&sem, &bad), -1);
  CHECK_EQ(errno, EINVAL);
  struct timespec ts = in_ms(CLOCK_MONOTONIC, 20);
  CHECK_EQ(sem_clockwait(&sem, CLOCK_MONOTONIC, &ts), -1);
  CHECK_EQ(errno, ETIMEDOUT);
  CHECK_EQ(sem_clockwait(&sem, CLOCK_PROCESS_CPUTIME_ID, &ts), -1);
  CHECK_EQ(errno, EINVAL);
  CHECK_EQ(sem_post(&sem), 0);
  CHECK_EQ(sem_getvalue(&sem, &v), 0);
  CHECK_EQ(v, 1);
  CHECK_EQ(sem_wait(&sem), 0);
  CHECK_EQ(sem_destroy(&sem), 0);
  CHECK_EQ(sem_init(&sem, 0, SEM_VALUE_MAX), 0);
  CHECK_EQ(sem_post(&sem), -1);
  CHECK_EQ(errno, EOVERFLOW);
  printf("semaphore: ok\n");
}

int main(void) {
  mutex_kinds();
  mutexattrs();
  pi_pp();
  pp();
  conds();
  rwlocks();
  others();
  return 0;
}
