/* Which calls act on a deferred cancellation that is already pending when
 * they are called: each call runs in a thread of its own that disabled
 * cancellation, canceled itself, enabled it again and then made the one
 * call, with everything it needs ready so that it never has to wait (data
 * in the pipe, a zombie child, a posted semaphore, a timeout of zero...).
 * A cancellation point unwinds the thread at entry (glibc acts before the
 * system call, so e.g. a canceled close leaves the descriptor open); any
 * other call returns. The output (one line per call) is the running
 * glibc's own list, compared with the native run's: a call that is a
 * cancellation point must stay one, and no other call may become one. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int pp[2];       /* a pipe: the read end has data when a probe needs it */
static int sp[2];       /* a stream socketpair */
static int dg[2];       /* a datagram socketpair */
static int lsn = -1;    /* a listening unix socket */
static int sock = -1;   /* a fresh unix socket (connect) */
static int file = -1;   /* a regular file with data */
static int dupfd = -1;  /* a duplicate to close */
static int epfd = -1;
static int evfd = -1;
static int opened = -1; /* what an open probe returned */
static int msq = -1;
static pid_t child = -1;
static pthread_t exited;
static int exited_joined;
static sem_t sem;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static char path[64], sockpath[108], buf[64];
static struct sockaddr_un sun;

static void fill_pipe(void) { CHECK_EQ(write(pp[1], "abcd", 4), 4); }
static void drain(int fd) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  while (read(fd, buf, sizeof buf) > 0) {
  }
  fcntl(fd, F_SETFL, fl);
}
static void fill_sock(void) {
  CHECK_EQ(write(sp[0], "abcd", 4), 4);
  CHECK_EQ(send(dg[0], "a", 1, 0), 1);
}
static void drain_socks(void) {
  drain(sp[1]);
  drain(dg[1]);
}

static void *waiter_unlock(void *a) { return a; }

/* ---- set-ups and tear-downs (main thread) ---- */
static void su_pipe(void) { fill_pipe(); }
static void td_pipe(void) { drain(pp[0]); }
static void su_sock(void) { fill_sock(); }
static void td_sock(void) { drain_socks(); }
static void su_accept(void) {
  opened = -1;
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  CHECK(connect(c, (struct sockaddr *)&sun, sizeof sun) == 0, "connect: %d", errno);
  close(c); /* the connection stays queued on the listener */
}
static void td_accept(void) {
  if (opened >= 0) close(opened);
  opened = -1;
  int fl = fcntl(lsn, F_GETFL);
  fcntl(lsn, F_SETFL, fl | O_NONBLOCK);
  int c;
  while ((c = accept(lsn, NULL, NULL)) >= 0) close(c);
  fcntl(lsn, F_SETFL, fl);
}
static void su_connect(void) { sock = socket(AF_UNIX, SOCK_STREAM, 0); }
static void td_connect(void) {
  close(sock);
  td_accept();
}
static void su_dup(void) { dupfd = dup(pp[0]); }
static void td_dup(void) {
  if (fcntl(dupfd, F_GETFD) >= 0) {
    printf("  (the descriptor is still open)\n");
    close(dupfd);
  } else {
    printf("  (the descriptor is closed)\n");
  }
}
static void su_open(void) { opened = -1; }
static void td_open(void) {
  if (opened >= 0) close(opened);
  unlink(path);
}
static void su_child(void) {
  child = fork();
  if (child == 0) _exit(0);
  siginfo_t si;
  CHECK(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0, "waitid: %d", errno);
}
static void td_child(void) {
  int st;
  if (waitpid(child, &st, WNOHANG) == child)
    printf("  (the child was still there)\n");
}
static void su_sem(void) { sem_post(&sem); }
static void td_sem(void) {
  while (sem_trywait(&sem) == 0) {
  }
}
/* The thread to join runs until the tear-down lets it end: a join that
 * acts on nothing would wait for it (then the test times out). */
static int jp[2];
static void *until_released(void *a) {
  char c;
  CHECK_EQ(read(jp[0], &c, 1), 1);
  return a;
}
static void su_exited(void) {
  CHECK_EQ(pthread_create(&exited, NULL, until_released, NULL), 0);
  exited_joined = 0;
}
static void td_exited(void) {
  CHECK_EQ(write(jp[1], "x", 1), 1);
  if (!exited_joined) {
    printf("  (the thread was still joinable)\n");
    CHECK_EQ(pthread_join(exited, NULL), 0);
  }
}
static void su_msg(void) {
  struct {
    long t;
    char c;
  } m = {1, 'a'};
  CHECK_EQ(msgsnd(msq, &m, 1, IPC_NOWAIT), 0);
}
static void td_msg(void) {
  struct {
    long t;
    char c;
  } m;
  while (msgrcv(msq, &m, 1, 0, IPC_NOWAIT) >= 0) {
  }
}
static void su_ev(void) { eventfd_write(evfd, 1); }
static void td_ev(void) {
  eventfd_t v;
  int fl = fcntl(evfd, F_GETFL);
  fcntl(evfd, F_SETFL, fl | O_NONBLOCK);
  eventfd_read(evfd, &v);
  fcntl(evfd, F_SETFL, fl);
}
static void su_lock(void) {}
static void td_lock(void) {
  struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
  fcntl(file, F_SETLK, &fl);
  flock(file, LOCK_UN);
}

/* ---- in the probe thread, before cancellation is enabled ---- */
static void pre_sig(void) {
  CHECK_EQ(pthread_kill(pthread_self(), SIGUSR1), 0); /* blocked: pending */
}
static void pre_lock(void) { pthread_mutex_lock(&mu); }
static void unlock_mu(void *a) {
  (void)a;
  pthread_mutex_unlock(&mu);
}

/* ---- the calls ---- */
static struct timespec zero;
static struct timespec past(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  t.tv_sec -= 1;
  return t;
}
static void c_read(void) { read(pp[0], buf, 1); }
static void c_readv(void) {
  struct iovec v = {buf, 1};
  readv(pp[0], &v, 1);
}
static void c_pread(void) { pread(file, buf, 1, 0); }
static void c_preadv(void) {
  struct iovec v = {buf, 1};
  preadv(file, &v, 1, 0);
}
static void c_preadv2(void) {
  struct iovec v = {buf, 1};
  preadv2(file, &v, 1, 0, 0);
}
static void c_write(void) { write(pp[1], "x", 1); }
static void c_writev(void) {
  struct iovec v = {"x", 1};
  writev(pp[1], &v, 1);
}
static void c_pwrite(void) { pwrite(file, "x", 1, 8); }
static void c_pwritev(void) {
  struct iovec v = {"x", 1};
  pwritev(file, &v, 1, 8);
}
static void c_pwritev2(void) {
  struct iovec v = {"x", 1};
  pwritev2(file, &v, 1, 8, 0);
}
static void c_recv(void) { recv(sp[1], buf, 1, 0); }
static void c_recvfrom(void) { recvfrom(sp[1], buf, 1, 0, NULL, NULL); }
static void c_recvmsg(void) {
  struct iovec v = {buf, 1};
  struct msghdr h = {.msg_iov = &v, .msg_iovlen = 1};
  recvmsg(sp[1], &h, 0);
}
static void c_recvmmsg(void) {
  struct iovec v = {buf, 1};
  struct mmsghdr h = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}};
  recvmmsg(dg[1], &h, 1, MSG_DONTWAIT, NULL);
}
static void c_send(void) { send(sp[0], "x", 1, 0); }
static void c_sendto(void) { sendto(sp[0], "x", 1, 0, NULL, 0); }
static void c_sendmsg(void) {
  struct iovec v = {"x", 1};
  struct msghdr h = {.msg_iov = &v, .msg_iovlen = 1};
  sendmsg(sp[0], &h, 0);
}
static void c_sendmmsg(void) {
  struct iovec v = {"x", 1};
  struct mmsghdr h = {.msg_hdr = {.msg_iov = &v, .msg_iovlen = 1}};
  sendmmsg(dg[0], &h, 1, 0);
}
static void c_accept(void) { opened = accept(lsn, NULL, NULL); }
static void c_accept4(void) { opened = accept4(lsn, NULL, NULL, SOCK_CLOEXEC); }
static void c_connect(void) { connect(sock, (struct sockaddr *)&sun, sizeof sun); }
static void c_close(void) { close(dupfd); }
static void c_open(void) { opened = open("/dev/null", O_RDONLY); }
static void c_open64(void) { opened = open64("/dev/null", O_RDONLY); }
static void c_openat(void) { opened = openat(AT_FDCWD, "/dev/null", O_RDONLY); }
static void c_creat(void) { opened = creat(path, 0600); }
static void c_fcntl_setlkw(void) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  fcntl(file, F_SETLKW, &fl);
}
static void c_fcntl_setlk(void) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  fcntl(file, F_SETLK, &fl);
}
static void c_fcntl_getfl(void) { fcntl(file, F_GETFL); }
static void c_lockf_lock(void) { lockf(file, F_LOCK, 0); }
static void c_lockf_tlock(void) { lockf(file, F_TLOCK, 0); }
static void c_flock(void) { flock(file, LOCK_EX); }
static void c_fsync(void) { fsync(file); }
static void c_fdatasync(void) { fdatasync(file); }
static void c_ioctl(void) {
  int n;
  ioctl(pp[0], FIONREAD, &n);
}
static void c_dup2(void) { opened = dup2(pp[0], 200); }
static void c_nanosleep(void) { nanosleep(&zero, NULL); }
static void c_clock_nanosleep(void) { clock_nanosleep(CLOCK_MONOTONIC, 0, &zero, NULL); }
static void c_usleep(void) { usleep(0); }
static void c_sleep(void) { sleep(0); }
static void c_thrd_sleep(void) { thrd_sleep(&zero, NULL); }
static void c_sched_yield(void) { sched_yield(); }
static void c_poll(void) {
  struct pollfd p = {pp[0], POLLIN, 0};
  poll(&p, 1, 0);
}
static void c_ppoll(void) {
  struct pollfd p = {pp[0], POLLIN, 0};
  ppoll(&p, 1, &zero, NULL);
}
static void c_select(void) {
  struct timeval tv = {0, 0};
  fd_set r;
  FD_ZERO(&r);
  FD_SET(pp[0], &r);
  select(pp[0] + 1, &r, NULL, NULL, &tv);
}
static void c_pselect(void) {
  fd_set r;
  FD_ZERO(&r);
  FD_SET(pp[0], &r);
  pselect(pp[0] + 1, &r, NULL, NULL, &zero, NULL);
}
static void c_epoll_wait(void) {
  struct epoll_event e;
  epoll_wait(epfd, &e, 1, 0);
}
static void c_epoll_pwait(void) {
  struct epoll_event e;
  epoll_pwait(epfd, &e, 1, 0, NULL);
}
static void c_wait(void) { wait(NULL); }
static void c_waitpid(void) { waitpid(child, NULL, 0); }
static void c_waitpid_nohang(void) { waitpid(child, NULL, WNOHANG); }
static void c_waitid(void) {
  siginfo_t si;
  waitid(P_PID, (id_t)child, &si, WEXITED);
}
static void c_wait3(void) { wait3(NULL, 0, NULL); }
static void c_wait4(void) { wait4(child, NULL, 0, NULL); }
static void c_sem_wait(void) { sem_wait(&sem); }
static void c_sem_timedwait(void) {
  struct timespec t = past(CLOCK_REALTIME);
  sem_timedwait(&sem, &t);
}
static void c_sem_clockwait(void) {
  struct timespec t = past(CLOCK_MONOTONIC);
  sem_clockwait(&sem, CLOCK_MONOTONIC, &t);
}
static void c_sem_trywait(void) { sem_trywait(&sem); }
static void c_sem_post(void) { sem_post(&sem); }
static void c_cond_timedwait(void) {
  struct timespec t = past(CLOCK_REALTIME);
  pthread_cleanup_push(unlock_mu, NULL);
  pthread_cond_timedwait(&cv, &mu, &t);
  pthread_cleanup_pop(1);
}
static void c_cond_clockwait(void) {
  struct timespec t = past(CLOCK_MONOTONIC);
  pthread_cleanup_push(unlock_mu, NULL);
  pthread_cond_clockwait(&cv, &mu, CLOCK_MONOTONIC, &t);
  pthread_cleanup_pop(1);
}
static void c_mutex_lock(void) {
  pthread_mutex_lock(&mu);
  pthread_mutex_unlock(&mu);
}
static void c_join(void) { exited_joined = pthread_join(exited, NULL) == 0; }
static void c_timedjoin(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += 60;
  exited_joined = pthread_timedjoin_np(exited, NULL, &t) == 0;
}
static void c_clockjoin(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += 60;
  exited_joined = pthread_clockjoin_np(exited, NULL, CLOCK_MONOTONIC, &t) == 0;
}
static void c_testcancel(void) { pthread_testcancel(); }
static void c_sigwait(void) {
  sigset_t s;
  int sig;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigwait(&s, &sig);
}
static void c_sigwaitinfo(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigwaitinfo(&s, NULL);
}
static void c_sigtimedwait(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  sigtimedwait(&s, NULL, &zero);
}
static void c_sigsuspend(void) {
  sigset_t s; /* opens SIGUSR1, pending: a handler runs and it returns */
  sigfillset(&s);
  sigdelset(&s, SIGUSR1);
  sigsuspend(&s);
}
static void c_msgrcv(void) {
  struct {
    long t;
    char c;
  } m;
  msgrcv(msq, &m, 1, 0, IPC_NOWAIT);
}
static void c_msgsnd(void) {
  struct {
    long t;
    char c;
  } m = {1, 'b'};
  msgsnd(msq, &m, 1, IPC_NOWAIT);
}
static void c_eventfd_read(void) {
  eventfd_t v;
  eventfd_read(evfd, &v);
}
static void c_splice(void) { splice(pp[0], NULL, sp[0], NULL, 1, 0); }
static int tq[2];
static void su_tee(void) {
  fill_pipe();
  CHECK_EQ(pipe(tq), 0);
}
static void td_tee(void) {
  drain(pp[0]);
  close(tq[0]);
  close(tq[1]);
}
static void c_tee(void) { tee(pp[0], tq[1], 1, 0); }
static void c_vmsplice(void) {
  struct iovec v = {"x", 1};
  vmsplice(pp[1], &v, 1, 0);
}
static void c_sendfile(void) {
  off_t off = 0;
  sendfile(pp[1], file, &off, 1);
}
static void c_copy_file_range(void) {
  loff_t a = 0, b = 16;
  copy_file_range(file, &a, file, &b, 1, 0);
}
static char semname[64];
static sem_t *named;
static void td_sem_open(void) {
  if (named && named != SEM_FAILED) sem_close(named);
  named = NULL;
  sem_unlink(semname);
}
static void c_sem_open(void) { named = sem_open(semname, O_CREAT, 0600, 0); }
static void c_thrd_join(void) { exited_joined = thrd_join((thrd_t)exited, NULL) == thrd_success; }
static void c_cnd_timedwait(void) {
  struct timespec t = past(CLOCK_REALTIME);
  pthread_cleanup_push(unlock_mu, NULL);
  cnd_timedwait((cnd_t *)&cv, (mtx_t *)&mu, &t);
  pthread_cleanup_pop(1);
}
/* syscall() is no cancellation point, whatever the call. */
static void c_sys_read(void) { syscall(SYS_read, pp[0], buf, 1); }
static void c_sys_close(void) { syscall(SYS_close, dupfd); }
static void c_sys_setlkw(void) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  syscall(SYS_fcntl, file, F_SETLKW, &fl);
}
static void c_sync_file_range(void) { sync_file_range(file, 0, 1, SYNC_FILE_RANGE_WRITE); }

struct probe {
  const char *name;
  void (*call)(void);
  void (*setup)(void);
  void (*teardown)(void);
  void (*pre)(void);
};

static const struct probe probes[] = {
    {"read", c_read, su_pipe, td_pipe, NULL},
    {"readv", c_readv, su_pipe, td_pipe, NULL},
    {"pread", c_pread, NULL, NULL, NULL},
    {"preadv", c_preadv, NULL, NULL, NULL},
    {"preadv2", c_preadv2, NULL, NULL, NULL},
    {"write", c_write, NULL, td_pipe, NULL},
    {"writev", c_writev, NULL, td_pipe, NULL},
    {"pwrite", c_pwrite, NULL, NULL, NULL},
    {"pwritev", c_pwritev, NULL, NULL, NULL},
    {"pwritev2", c_pwritev2, NULL, NULL, NULL},
    {"recv", c_recv, su_sock, td_sock, NULL},
    {"recvfrom", c_recvfrom, su_sock, td_sock, NULL},
    {"recvmsg", c_recvmsg, su_sock, td_sock, NULL},
    {"recvmmsg", c_recvmmsg, su_sock, td_sock, NULL},
    {"send", c_send, NULL, td_sock, NULL},
    {"sendto", c_sendto, NULL, td_sock, NULL},
    {"sendmsg", c_sendmsg, NULL, td_sock, NULL},
    {"sendmmsg", c_sendmmsg, NULL, td_sock, NULL},
    {"accept", c_accept, su_accept, td_accept, NULL},
    {"accept4", c_accept4, su_accept, td_accept, NULL},
    {"connect", c_connect, su_connect, td_connect, NULL},
    {"close", c_close, su_dup, td_dup, NULL},
    {"open", c_open, su_open, td_open, NULL},
    {"open64", c_open64, su_open, td_open, NULL},
    {"openat", c_openat, su_open, td_open, NULL},
    {"creat", c_creat, su_open, td_open, NULL},
    {"fcntl(F_SETLKW)", c_fcntl_setlkw, su_lock, td_lock, NULL},
    {"fcntl(F_SETLK)", c_fcntl_setlk, su_lock, td_lock, NULL},
    {"fcntl(F_GETFL)", c_fcntl_getfl, NULL, NULL, NULL},
    {"lockf(F_LOCK)", c_lockf_lock, su_lock, td_lock, NULL},
    {"lockf(F_TLOCK)", c_lockf_tlock, su_lock, td_lock, NULL},
    {"flock", c_flock, su_lock, td_lock, NULL},
    {"fsync", c_fsync, NULL, NULL, NULL},
    {"fdatasync", c_fdatasync, NULL, NULL, NULL},
    {"sync_file_range", c_sync_file_range, NULL, NULL, NULL},
    {"copy_file_range", c_copy_file_range, NULL, NULL, NULL},
    {"sendfile", c_sendfile, NULL, td_pipe, NULL},
    {"splice", c_splice, su_pipe, td_pipe, NULL},
    {"tee", c_tee, su_tee, td_tee, NULL},
    {"vmsplice", c_vmsplice, NULL, td_pipe, NULL},
    {"ioctl(FIONREAD)", c_ioctl, NULL, NULL, NULL},
    {"dup2", c_dup2, su_open, td_open, NULL},
    {"nanosleep", c_nanosleep, NULL, NULL, NULL},
    {"clock_nanosleep", c_clock_nanosleep, NULL, NULL, NULL},
    {"usleep", c_usleep, NULL, NULL, NULL},
    {"sleep", c_sleep, NULL, NULL, NULL},
    {"thrd_sleep", c_thrd_sleep, NULL, NULL, NULL},
    {"sched_yield", c_sched_yield, NULL, NULL, NULL},
    {"poll", c_poll, su_pipe, td_pipe, NULL},
    {"ppoll", c_ppoll, su_pipe, td_pipe, NULL},
    {"select", c_select, su_pipe, td_pipe, NULL},
    {"pselect", c_pselect, su_pipe, td_pipe, NULL},
    {"epoll_wait", c_epoll_wait, su_pipe, td_pipe, NULL},
    {"epoll_pwait", c_epoll_pwait, su_pipe, td_pipe, NULL},
    {"wait", c_wait, su_child, td_child, NULL},
    {"waitpid", c_waitpid, su_child, td_child, NULL},
    {"waitpid(WNOHANG)", c_waitpid_nohang, su_child, td_child, NULL},
    {"waitid", c_waitid, su_child, td_child, NULL},
    {"wait3", c_wait3, su_child, td_child, NULL},
    {"wait4", c_wait4, su_child, td_child, NULL},
    {"sem_wait", c_sem_wait, su_sem, td_sem, NULL},
    {"sem_timedwait", c_sem_timedwait, su_sem, td_sem, NULL},
    {"sem_clockwait", c_sem_clockwait, su_sem, td_sem, NULL},
    {"sem_clockwait (0, past)", c_sem_clockwait, NULL, td_sem, NULL},
    {"sem_trywait", c_sem_trywait, su_sem, td_sem, NULL},
    {"sem_post", c_sem_post, NULL, td_sem, NULL},
    {"pthread_cond_timedwait", c_cond_timedwait, NULL, NULL, pre_lock},
    {"pthread_cond_clockwait", c_cond_clockwait, NULL, NULL, pre_lock},
    {"pthread_mutex_lock", c_mutex_lock, NULL, NULL, NULL},
    {"pthread_join", c_join, su_exited, td_exited, NULL},
    {"pthread_timedjoin_np", c_timedjoin, su_exited, td_exited, NULL},
    {"pthread_clockjoin_np", c_clockjoin, su_exited, td_exited, NULL},
    {"pthread_testcancel", c_testcancel, NULL, NULL, NULL},
    {"sigwait", c_sigwait, NULL, NULL, pre_sig},
    {"sigwaitinfo", c_sigwaitinfo, NULL, NULL, pre_sig},
    {"sigtimedwait", c_sigtimedwait, NULL, NULL, NULL},
    {"sigsuspend", c_sigsuspend, NULL, NULL, pre_sig},
    {"msgrcv", c_msgrcv, su_msg, td_msg, NULL},
    {"msgsnd", c_msgsnd, NULL, td_msg, NULL},
    {"eventfd_read", c_eventfd_read, su_ev, td_ev, NULL},
    {"sem_open", c_sem_open, NULL, td_sem_open, NULL},
    {"thrd_join", c_thrd_join, su_exited, td_exited, NULL},
    {"cnd_timedwait", c_cnd_timedwait, NULL, NULL, pre_lock},
    {"syscall(SYS_read)", c_sys_read, su_pipe, td_pipe, NULL},
    {"syscall(SYS_close)", c_sys_close, su_dup, td_dup, NULL},
    {"syscall(SYS_fcntl, F_SETLKW)", c_sys_setlkw, su_lock, td_lock, NULL},
};

static volatile int acted;

static void on_unwind(void *a) {
  (void)a;
  acted = 1;
}

static void *runner(void *arg) {
  const struct probe *p = arg;
  int old;
  CHECK_EQ(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old), 0);
  CHECK_EQ(pthread_cancel(pthread_self()), 0);
  if (p->pre) p->pre();
  pthread_cleanup_push(on_unwind, NULL);
  pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
  p->call();
  /* Returned: nothing else may act on the cancellation now. */
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  pthread_cleanup_pop(0);
  return NULL;
}

static void on_usr1(int s) { (void)s; }

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  CHECK_EQ(pipe(pp), 0);
  CHECK_EQ(pipe(jp), 0);
  CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  CHECK_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg), 0);
  snprintf(sockpath, sizeof sockpath, "/tmp/cancel-points-%d.sock", (int)getpid());
  snprintf(path, sizeof path, "/tmp/cancel-points-%d.creat", (int)getpid());
  snprintf(semname, sizeof semname, "/cancel-points-%d", (int)getpid());
  memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  strcpy(sun.sun_path, sockpath);
  lsn = socket(AF_UNIX, SOCK_STREAM, 0);
  unlink(sockpath);
  CHECK(bind(lsn, (struct sockaddr *)&sun, sizeof sun) == 0, "bind: %d", errno);
  CHECK_EQ(listen(lsn, 16), 0);
  char fpath[64];
  snprintf(fpath, sizeof fpath, "/tmp/cancel-points-%d.file", (int)getpid());
  file = open(fpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(file >= 0, "open: %d", errno);
  unlink(fpath);
  CHECK_EQ(write(file, "0123456789abcdefghij", 20), 20);
  epfd = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = pp[0]};
  CHECK_EQ(epoll_ctl(epfd, EPOLL_CTL_ADD, pp[0], &ev), 0);
  evfd = eventfd(0, 0);
  CHECK(evfd >= 0, "eventfd: %d", errno);
  msq = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
  CHECK(msq >= 0, "msgget: %d", errno);
  CHECK_EQ(sem_init(&sem, 0, 0), 0);
  /* SIGUSR1: blocked in every thread (sigwait takes it), with a handler for
   * sigsuspend. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, NULL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &s, NULL);
  (void)waiter_unlock;

  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
    const struct probe *p = &probes[i];
    if (p->setup) p->setup();
    acted = 0;
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, runner, (void *)p), 0);
    void *ret;
    CHECK_EQ(pthread_join(t, &ret), 0);
    CHECK(acted == (ret == PTHREAD_CANCELED), "%s: acted %d, ret %p", p->name, acted, ret);
    printf("%-30s %s\n", p->name, acted ? "cancellation point" : "returned");
    if (p->teardown) p->teardown();
  }
  msgctl(msq, IPC_RMID, NULL);
  unlink(sockpath);
  return 0;
}
