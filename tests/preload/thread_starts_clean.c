/* A new thread starts clean whatever the thread before it left behind:
 * threads that store thread-specific values (first-level keys, keys past
 * the first 32, NULL values, and a value its destructor stores again
 * each time, so that it outlives the destructor passes), leave cancelation disabled and
 * asynchronous, set errno, a __thread variable, a locale and a signal
 * mask, and change their resolver state, then exit; the threads created
 * after them (one at a time, so an implementation that recycles thread
 * descriptors hands the same one on, and in waves) must see none of it.
 *
 * Resolver state: a new thread's _res is not initialized (res_init has
 * not run in it: RES_INIT clear) and holds none of the options another
 * thread set in its own. (glibc clears only the options of a reused
 * thread descriptor's _res: retry, ndots, name servers and the rest may
 * survive there until res_init runs, so they are not checked.) A thread
 * that wrote those fields without running res_init (its options stay 0)
 * leaves nothing that the next thread's res_init does not replace: the
 * options, ndots and name servers res_init gives are those it gives in a
 * thread nobody ran before. (Not retry and retrans: res_init keeps values
 * a program set before it, and glibc hands a reused descriptor's on.) */
#include <errno.h>
#include <locale.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <resolv.h>
#include <signal.h>
#include <stdint.h>

#include "common.h"

#define NKEYS 40 /* past PTHREAD_KEY_2NDLEVEL_SIZE (32): a second level too */
static pthread_key_t keys[NKEYS];
static pthread_key_t null_key; /* only ever given NULL */
/* Its destructor stores the value again every time: the value outlives
 * every destructor pass of its thread (PTHREAD_DESTRUCTOR_ITERATIONS). */
static pthread_key_t sticky_key;
static void sticky_destr(void *v) { pthread_setspecific(sticky_key, v); }
static __thread int tvar = 17;
static locale_t cloc;

static void *dirty(void *arg) {
  long round = (long)arg;
  for (int i = 0; i < NKEYS; i++)
    CHECK_EQ(pthread_setspecific(keys[i], (void *)(uintptr_t)(round * 100 + i + 1)), 0);
  CHECK_EQ(pthread_setspecific(null_key, NULL), 0);
  CHECK_EQ(pthread_setspecific(sticky_key, (void *)(uintptr_t)(round + 1)), 0);
  int old;
  CHECK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old), 0);
  CHECK_EQ(pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old), 0);
  errno = EIO;
  tvar = 99;
  CHECK(uselocale(cloc) != (locale_t)0, "uselocale");
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, &s, NULL), 0);
  /* Resolver state: initialized and changed in this thread only. */
  CHECK_EQ(res_init(), 0);
  CHECK((_res.options & RES_INIT) != 0, "res_init did not set RES_INIT");
  _res.options |= RES_USEVC | RES_STAYOPEN;
  _res.retry = 7;
  _res.retrans = 9;
  _res.ndots = 5;
  if (round & 1) {
    /* Leave async and disabled; (odd rounds) leave through pthread_exit. */
    pthread_exit((void *)1);
  }
  return (void *)1;
}

static void check_clean(const char *who) {
  for (int i = 0; i < NKEYS; i++)
    CHECK(pthread_getspecific(keys[i]) == NULL, "%s: key %d holds %p", who, i,
          pthread_getspecific(keys[i]));
  CHECK(pthread_getspecific(null_key) == NULL, "%s: null key", who);
  CHECK(pthread_getspecific(sticky_key) == NULL, "%s: sticky key holds %p", who,
        pthread_getspecific(sticky_key));
  int old;
  CHECK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old), 0);
  CHECK(old == PTHREAD_CANCEL_ENABLE, "%s: cancel state inherited", who);
  CHECK_EQ(pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &old), 0);
  CHECK(old == PTHREAD_CANCEL_DEFERRED, "%s: cancel type inherited", who);
  CHECK(errno == 0, "%s: errno %d", who, errno);
  CHECK(tvar == 17, "%s: __thread %d", who, tvar);
  CHECK(uselocale((locale_t)0) == LC_GLOBAL_LOCALE, "%s: locale inherited", who);
  /* Created by main, whose mask is empty: the dirty thread's mask is not
   * this one's. */
  sigset_t cur;
  CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
  CHECK(!sigismember(&cur, SIGUSR1), "%s: signal mask inherited", who);
  CHECK((_res.options & RES_INIT) == 0, "%s: _res initialized (options %#lx)", who,
        (unsigned long)_res.options);
  CHECK((_res.options & (RES_USEVC | RES_STAYOPEN)) == 0, "%s: _res options %#lx", who,
        (unsigned long)_res.options);
}

/* What res_init gives a thread: taken in a thread before any other. */
static int ref_ndots, ref_nscount;
static unsigned long ref_options;
static struct sockaddr_in ref_ns0;

static void *res_reference(void *arg) {
  CHECK_EQ(res_init(), 0);
  ref_ndots = _res.ndots;
  ref_options = _res.options;
  ref_nscount = _res.nscount;
  ref_ns0 = _res.nsaddr_list[0];
  return arg;
}

/* Changes its resolver state without res_init: options stay 0. */
static void *res_fields_only(void *arg) {
  CHECK((_res.options & RES_INIT) == 0, "res_fields_only: _res initialized");
  _res.ndots = (ref_ndots + 3) & 15;
  _res.nscount = 3;
  for (int i = 0; i < 3; i++) {
    _res.nsaddr_list[i].sin_family = AF_INET;
    _res.nsaddr_list[i].sin_port = htons(5353 + i);
    _res.nsaddr_list[i].sin_addr.s_addr = htonl(0x0a000001 + i);
  }
  return arg;
}

static void *res_reinit(void *arg) {
  CHECK((_res.options & RES_INIT) == 0, "res_reinit: _res initialized (options %#lx)",
        (unsigned long)_res.options);
  CHECK_EQ(res_init(), 0);
  CHECK(_res.ndots == ref_ndots && _res.options == ref_options && _res.nscount == ref_nscount,
        "res_init after a thread that changed _res: ndots %d options %#lx nscount %d, "
        "first thread's %d %#lx %d",
        _res.ndots, (unsigned long)_res.options, _res.nscount, ref_ndots, ref_options,
        ref_nscount);
  CHECK(_res.nsaddr_list[0].sin_port == ref_ns0.sin_port &&
            _res.nsaddr_list[0].sin_addr.s_addr == ref_ns0.sin_addr.s_addr,
        "res_init after a thread that changed _res: first name server %#x:%u, first thread's "
        "%#x:%u",
        ntohl(_res.nsaddr_list[0].sin_addr.s_addr), ntohs(_res.nsaddr_list[0].sin_port),
        ntohl(ref_ns0.sin_addr.s_addr), ntohs(ref_ns0.sin_port));
  return arg;
}

static void *clean(void *arg) {
  check_clean((const char *)arg);
  /* Leaves nothing: the next thread checks again. */
  return (void *)2;
}

int main(void) {
  for (int i = 0; i < NKEYS; i++) CHECK_EQ(pthread_key_create(&keys[i], NULL), 0);
  CHECK_EQ(pthread_key_create(&null_key, NULL), 0);
  CHECK_EQ(pthread_key_create(&sticky_key, sticky_destr), 0);
  cloc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  CHECK(cloc != (locale_t)0, "newlocale");
  pthread_t t;
  void *r;
  CHECK_EQ(pthread_create(&t, NULL, res_reference, NULL), 0);
  CHECK_EQ(pthread_join(t, NULL), 0);
  /* Resolver fields written without res_init, then res_init: one at a
   * time and in waves. */
  for (int round = 0; round < 100; round++) {
    CHECK_EQ(pthread_create(&t, NULL, res_fields_only, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(pthread_create(&t, NULL, res_reinit, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
  }
  {
    enum { RW = 16 };
    pthread_t rw[RW];
    for (int round = 0; round < 10; round++) {
      for (int i = 0; i < RW; i++) CHECK_EQ(pthread_create(&rw[i], NULL, res_fields_only, NULL), 0);
      for (int i = 0; i < RW; i++) CHECK_EQ(pthread_join(rw[i], NULL), 0);
      for (int i = 0; i < RW; i++) CHECK_EQ(pthread_create(&rw[i], NULL, res_reinit, NULL), 0);
      for (int i = 0; i < RW; i++) CHECK_EQ(pthread_join(rw[i], NULL), 0);
    }
  }
  /* One at a time: dirty, then clean, many times. */
  for (long round = 0; round < 300; round++) {
    CHECK_EQ(pthread_create(&t, NULL, dirty, (void *)round), 0);
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == (void *)1, "dirty returned %p", r);
    CHECK_EQ(pthread_create(&t, NULL, clean, "after one"), 0);
    CHECK_EQ(pthread_join(t, &r), 0);
    CHECK(r == (void *)2, "clean returned %p", r);
  }
  /* Waves: 32 dirty threads, then 64 clean ones. */
  enum { W = 32 };
  pthread_t w[2 * W];
  for (long round = 0; round < 20; round++) {
    for (int i = 0; i < W; i++) CHECK_EQ(pthread_create(&w[i], NULL, dirty, (void *)(round + i)), 0);
    for (int i = 0; i < W; i++) CHECK_EQ(pthread_join(w[i], NULL), 0);
    for (int i = 0; i < 2 * W; i++) CHECK_EQ(pthread_create(&w[i], NULL, clean, "in a wave"), 0);
    for (int i = 0; i < 2 * W; i++) {
      CHECK_EQ(pthread_join(w[i], &r), 0);
      CHECK(r == (void *)2, "clean returned %p", r);
    }
  }
  /* Detached dirty threads too (their descriptors are recycled at exit). */
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  for (long round = 0; round < 50; round++) {
    CHECK_EQ(pthread_create(&t, &a, dirty, (void *)(round * 2)), 0);
    CHECK_EQ(pthread_create(&t, NULL, clean, "after detached"), 0);
    CHECK_EQ(pthread_join(t, &r), 0);
  }
  pthread_attr_destroy(&a);
  printf("ok\n");
  return 0;
}
