/* Process-shared objects used together with a second process: a shared
 * memory segment (shm_open + MAP_SHARED) holds a process-shared mutex,
 * condition variable, semaphore and a raw futex word; a named semaphore
 * (sem_open) starts and ends the exchange. Several threads here and one in
 * the helper (sync_pshared_helper, started with posix_spawn: under goshim
 * too, since it inherits LD_PRELOAD) increment a counter under the mutex,
 * then play condvar and futex (non-private FUTEX_WAIT/WAKE, as libstdc++
 * issues them) ping-pong across the processes. Finally a robust
 * process-shared mutex is left locked by a helper that exits (run natively:
 * the kernel marks it) and the next locker here gets EOWNERDEAD. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"
#include "sync_pshared.h"

extern char **environ;
static struct shared *sh;
static int per_thread;

static void *incrementer(void *arg) {
  for (int i = 0; i < per_thread; i++) {
    CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
    CHECK_EQ(__atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST), 1);
    sh->counter++;
    __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
    CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  }
  return arg;
}

static pid_t spawn_helper(const char *self, const char *mode, const char *shm, const char *sem,
                          int native) {
  char helper[4096];
  snprintf(helper, sizeof helper, "%s_helper", self);
  char *argv[] = {helper, (char *)mode, (char *)shm, (char *)sem, NULL};
  char **env = environ;
  char *clean[256];
  if (native) { /* drop LD_PRELOAD: a plain glibc process */
    int n = 0;
    for (char **e = environ; *e && n < 255; e++)
      if (strncmp(*e, "LD_PRELOAD=", 11) != 0) clean[n++] = *e;
    clean[n] = NULL;
    env = clean;
  }
  pid_t pid;
  CHECK_EQ(posix_spawn(&pid, helper, NULL, NULL, argv, env), 0);
  return pid;
}

static void wait_helper(pid_t pid) {
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "helper failed (status %d)", st);
}

int main(int argc, char **argv) {
  int nthreads = env_int("NTHREADS", 4);
  per_thread = env_int("PER_THREAD", 20000);
  char shm[64], sem[64];
  snprintf(shm, sizeof shm, "/goshim_pshared_%d", (int)getpid());
  snprintf(sem, sizeof sem, "/goshim_psem_%d", (int)getpid());
  int fd = shm_open(shm, O_CREAT | O_EXCL | O_RDWR, 0600);
  CHECK(fd >= 0, "shm_open: %s", strerror(errno));
  CHECK_EQ(ftruncate(fd, sizeof(struct shared)), 0);
  sh = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(sh != MAP_FAILED, "mmap");
  close(fd);
  init_shared(sh);
  sem_t *start = sem_open(sem, O_CREAT | O_EXCL, 0600, 0);
  CHECK(start != SEM_FAILED, "sem_open: %s", strerror(errno));

  pid_t pid = spawn_helper(argv[0], "inc", shm, sem, 0);
  sh->helper_iters = per_thread;
  /* the helper says it is ready through the named semaphore */
  while (sem_wait(start) != 0) CHECK_EQ(errno, EINTR);
  pthread_t *t = malloc(sizeof(pthread_t) * nthreads);
  for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, incrementer, NULL);
  CHECK_EQ(sem_post(&sh->go), 0); /* unnamed process-shared semaphore */
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);

  /* condvar ping-pong: we play turn 0, the helper turn 1 */
  for (int i = 0; i < PINGPONGS; i++) {
    CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
    while (sh->turn != 0) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->mu), 0);
    sh->turn = 1;
    CHECK_EQ(pthread_cond_signal(&sh->cv), 0);
    CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  }
  /* raw futex ping-pong on the shared word (non-private operations) */
  for (int i = 0; i < PINGPONGS; i++) {
    int v;
    while ((v = __atomic_load_n(&sh->fword, __ATOMIC_ACQUIRE)) != 0)
      syscall(SYS_futex, &sh->fword, FUTEX_WAIT, v, NULL, NULL, 0);
    __atomic_store_n(&sh->fword, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &sh->fword, FUTEX_WAKE, 1, NULL, NULL, 0);
  }
  rw_and_barrier(sh, 0);
  CHECK_EQ(sem_post(start), 0); /* the helper may finish */
  wait_helper(pid);
  CHECK_EQ(sh->counter, (long)nthreads * per_thread + per_thread);
  printf("counter %ld: mutual exclusion across processes held\n", sh->counter);
  printf("%d condvar and %d futex round trips across processes\n", PINGPONGS, PINGPONGS);
  CHECK_EQ(sh->rw_a, RW_ROUNDS / 2);
  printf("rwlock and barrier shared across processes\n");

  /* a native helper dies holding the robust mutex */
  pid = spawn_helper(argv[0], "die", shm, sem, 1);
  wait_helper(pid);
  CHECK_EQ(pthread_mutex_lock(&sh->robust), EOWNERDEAD);
  CHECK_EQ(pthread_mutex_consistent(&sh->robust), 0);
  CHECK_EQ(pthread_mutex_unlock(&sh->robust), 0);
  printf("robust process-shared mutex: EOWNERDEAD after the owner process exited\n");

  CHECK_EQ(sem_close(start), 0);
  CHECK_EQ(sem_unlink(sem), 0);
  CHECK_EQ(shm_unlink(shm), 0);
  return 0;
}
