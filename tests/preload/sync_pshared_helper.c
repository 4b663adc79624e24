/* The second process of sync_pshared (not a test case of its own). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"
#include "sync_pshared.h"

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int fd = shm_open(argv[2], O_RDWR, 0);
  CHECK(fd >= 0, "helper shm_open: %s", strerror(errno));
  struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(sh != MAP_FAILED, "helper mmap");
  close(fd);
  if (strcmp(argv[1], "die") == 0) {
    CHECK_EQ(pthread_mutex_lock(&sh->robust), 0);
    _exit(0); /* holding it */
  }
  sem_t *start = sem_open(argv[3], 0);
  CHECK(start != SEM_FAILED, "helper sem_open: %s", strerror(errno));
  CHECK_EQ(sem_post(start), 0);
  while (sem_wait(&sh->go) != 0) CHECK_EQ(errno, EINTR);
  for (int i = 0; i < sh->helper_iters; i++) {
    CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
    CHECK_EQ(__atomic_add_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST), 1);
    sh->counter++;
    __atomic_sub_fetch(&sh->inside, 1, __ATOMIC_SEQ_CST);
    CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  }
  for (int i = 0; i < PINGPONGS; i++) {
    CHECK_EQ(pthread_mutex_lock(&sh->mu), 0);
    while (sh->turn != 1) CHECK_EQ(pthread_cond_wait(&sh->cv, &sh->mu), 0);
    sh->turn = 0;
    CHECK_EQ(pthread_cond_signal(&sh->cv), 0);
    CHECK_EQ(pthread_mutex_unlock(&sh->mu), 0);
  }
  for (int i = 0; i < PINGPONGS; i++) {
    int v;
    while ((v = __atomic_load_n(&sh->fword, __ATOMIC_ACQUIRE)) != 1)
      syscall(SYS_futex, &sh->fword, FUTEX_WAIT, v, NULL, NULL, 0);
    __atomic_store_n(&sh->fword, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &sh->fword, FUTEX_WAKE, 1, NULL, NULL, 0);
  }
  rw_and_barrier(sh, 1);
  while (sem_wait(start) != 0) CHECK_EQ(errno, EINTR);
  sem_close(start);
  return 0;
}
