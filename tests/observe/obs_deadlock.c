/* Programs that can never finish, and programs that are merely idle:
 *   obs_deadlock mutexes   two threads take two mutexes in opposite orders
 *   obs_deadlock cond      main joins a thread waiting on a condition
 *                          variable nobody signals
 *   obs_deadlock accept    a server idle in accept() on 127.0.0.1
 *   obs_deadlock sleep     main joins a thread in sleep(3600)
 *   obs_deadlock child     main waits for a child that sleeps
 *   obs_deadlock sigwait   main waits for a signal
 *   obs_deadlock read      main reads a pipe nobody writes to yet
 *   obs_deadlock poll      main polls a socket with no timeout
 *   obs_deadlock epoll     main waits in epoll_wait on its own epoll fd
 *   obs_deadlock alarm     main relocks a mutex it holds after alarm(2)
 *                          (no handler: SIGALRM's default action ends it)
 * Natively the first two hang forever; all but alarm are killed by the
 * test's timeout (or by goshim's deadlock=fatal). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;

static void *ab(void *arg) {
  (void)arg;
  pthread_mutex_lock(&a);
  pthread_barrier_wait(&bar);
  pthread_mutex_lock(&b);
  return NULL;
}

static void *ba(void *arg) {
  (void)arg;
  pthread_mutex_lock(&b);
  pthread_barrier_wait(&bar);
  pthread_mutex_lock(&a);
  return NULL;
}

static void *cond_waiter(void *arg) {
  (void)arg;
  pthread_mutex_lock(&cmu);
  while (!flag) pthread_cond_wait(&cv, &cmu);
  pthread_mutex_unlock(&cmu);
  return NULL;
}

static void *sleeper(void *arg) {
  (void)arg;
  sleep(3600);
  return NULL;
}

int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  pthread_t t1, t2;
  printf("start %s\n", what);
  fflush(stdout);
  if (strcmp(what, "mutexes") == 0) {
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&t1, NULL, ab, NULL);
    pthread_create(&t2, NULL, ba, NULL);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
  } else if (strcmp(what, "cond") == 0) {
    pthread_create(&t1, NULL, cond_waiter, NULL);
    pthread_join(t1, NULL);
  } else if (strcmp(what, "accept") == 0) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(s, 16) != 0) return 1;
    for (;;) {
      int c = accept(s, NULL, NULL);
      if (c >= 0) close(c);
    }
  } else if (strcmp(what, "sleep") == 0) {
    pthread_create(&t1, NULL, sleeper, NULL);
    pthread_join(t1, NULL);
  } else if (strcmp(what, "child") == 0) {
    pid_t p = fork();
    if (p == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      sleep(3600);
      _exit(0);
    }
    waitpid(p, NULL, 0);
  } else if (strcmp(what, "sigwait") == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int sig;
    sigwait(&set, &sig);
  } else if (strcmp(what, "read") == 0) {
    int p[2];
    char c;
    if (pipe(p) != 0) return 1;
    read(p[0], &c, 1);
  } else if (strcmp(what, "poll") == 0) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
    struct pollfd p = {sv[0], POLLIN, 0};
    poll(&p, 1, -1);
  } else if (strcmp(what, "epoll") == 0) {
    int p[2];
    if (pipe(p) != 0) return 1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    epoll_wait(ep, &ev, 1, -1);
  } else if (strcmp(what, "alarm") == 0) {
    pthread_mutex_lock(&a);
    alarm(2);
    pthread_mutex_lock(&a);
  }
  return 0;
}
