/* Programs whose every thread is blocked, but which something outside
 * their threads ends or wakes in the program's own way:
 *   alarm        relocks a normal mutex it holds; alarm() + a SIGALRM
 *                handler that exits with status 7
 *   alarm_dfl    the same with no handler: SIGALRM's default action
 *   itimer       setitimer(ITIMER_REAL), no handler
 *   timer        timer_create(CLOCK_MONOTONIC, SIGEV_SIGNAL), no handler
 *   child        a child process sends SIGTERM to its blocked parent
 *   pipe         a thread reads a pipe that another process writes to
 *                after a handshake; main joins that thread
 *   psem         main waits on a process-shared semaphore a child posts
 * Each scenario runs in its own process (this program re-executed) with
 * stderr captured; the parent checks how the scenario ended and that it
 * wrote nothing to stderr (nobody may report a deadlock: there is none)
 * beyond what a process of this program that does nothing writes there
 * (the "start" scenario: nothing natively; a preloaded library may have its
 * own start-up line, and that is not what this test is about). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Relocks mu: natively blocks forever. */
static void relock(void) {
  CHECK_EQ(pthread_mutex_lock(&mu), 0);
  pthread_mutex_lock(&mu);
  fprintf(stderr, "relock returned\n");
  exit(1);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "alarm handler\n";
  write(1, msg, sizeof msg - 1);
  _exit(7);
}

/* 1 if every thread of process pid is asleep (state S). */
static int all_sleeping(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  struct dirent *e;
  int ok = 1, n = 0;
  while (ok && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sp[300], buf[512];
    snprintf(sp, sizeof sp, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
    int fd = open(sp, O_RDONLY);
    if (fd < 0) continue; /* the thread just exited */
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0) continue;
    buf[k] = 0;
    char *p = strrchr(buf, ')');
    ok = p && p[1] == ' ' && p[2] == 'S';
    n++;
  }
  closedir(d);
  return ok && n > 0;
}

/* After the blocked side said it is about to block: waits until all its
 * threads sleep, then leaves it blocked for a second, time enough for
 * anything that wrongly thinks it can never wake to say so. */
static void let_it_block(int ctl, pid_t pid) {
  char c;
  CHECK_EQ(read(ctl, &c, 1), 1);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int asleep;
  while (!(asleep = all_sleeping(pid))) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 20) break;
    usleep(1000);
  }
  CHECK(asleep, "process %d never blocked", (int)pid);
  usleep(1000 * 1000);
}

static int data_fd, ctl_fd;

static void *reader(void *arg) {
  (void)arg;
  char c = 0;
  CHECK_EQ(write(ctl_fd, "r", 1), 1);
  CHECK_EQ(read(data_fd, &c, 1), 1);
  CHECK_EQ(c, 'x');
  return NULL;
}

static int scenario(const char *what) {
  if (strcmp(what, "alarm") == 0) {
    signal(SIGALRM, on_alarm);
    alarm(1);
    relock();
  } else if (strcmp(what, "alarm_dfl") == 0) {
    alarm(1);
    relock();
  } else if (strcmp(what, "itimer") == 0) {
    struct itimerval it = {{0, 0}, {1, 0}};
    CHECK_EQ(setitimer(ITIMER_REAL, &it, NULL), 0);
    relock();
  } else if (strcmp(what, "timer") == 0) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGALRM;
    timer_t t;
    CHECK_EQ(timer_create(CLOCK_MONOTONIC, &ev, &t), 0);
    struct itimerspec its = {{0, 0}, {1, 0}};
    CHECK_EQ(timer_settime(t, 0, &its, NULL), 0);
    relock();
  } else if (strcmp(what, "child") == 0) {
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t parent = getpid();
    pid_t kid = fork();
    CHECK(kid >= 0, "fork");
    if (kid == 0) {
      close(p[1]);
      let_it_block(p[0], parent);
      kill(parent, SIGTERM);
      _exit(0);
    }
    close(p[0]);
    CHECK_EQ(pthread_mutex_lock(&mu), 0);
    CHECK_EQ(write(p[1], "b", 1), 1);
    pthread_mutex_lock(&mu);
    fprintf(stderr, "relock returned\n");
    return 1;
  } else if (strcmp(what, "pipe") == 0) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, reader, NULL), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    printf("read the byte\n");
    return 0;
  } else if (strcmp(what, "psem") == 0) {
    sem_t *s = mmap(NULL, sizeof(sem_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(s != MAP_FAILED, "mmap");
    CHECK_EQ(sem_init(s, 1, 0), 0);
    int p[2];
    CHECK_EQ(pipe(p), 0);
    pid_t parent = getpid();
    pid_t kid = fork();
    CHECK(kid >= 0, "fork");
    if (kid == 0) {
      close(p[1]);
      let_it_block(p[0], parent);
      sem_post(s);
      _exit(0);
    }
    close(p[0]);
    CHECK_EQ(write(p[1], "s", 1), 1);
    int r;
    while ((r = sem_wait(s)) != 0 && errno == EINTR) {
    }
    CHECK_EQ(r, 0);
    int st;
    CHECK_EQ(waitpid(kid, &st, 0), kid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
    printf("posted\n");
    return 0;
  } else if (strcmp(what, "start") == 0) {
    return 0; /* nothing: what every process of this program writes at start-up */
  }
  fprintf(stderr, "unknown scenario %s\n", what);
  return 1;
}

/* What a process of this program that does nothing writes to stderr (the
 * "start" scenario, run first; nothing natively). */
static char start_err[4096];
static int have_start;

/* Runs one scenario in a new process; returns its wait status. Its
 * stderr must be what the "start" scenario wrote, nothing more. */
static int run(const char *what) {
  int err[2], data[2], ctl[2];
  CHECK_EQ(pipe(err), 0);
  CHECK_EQ(pipe(data), 0);
  CHECK_EQ(pipe(ctl), 0);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(err[1], 2);
    close(err[0]);
    close(err[1]);
    close(data[1]);
    close(ctl[0]);
    char dfd[16], cfd[16];
    snprintf(dfd, sizeof dfd, "%d", data[0]);
    snprintf(cfd, sizeof cfd, "%d", ctl[1]);
    execl("/proc/self/exe", "blocked_wayout", "scenario", what, dfd, cfd, (char *)NULL);
    _exit(127);
  }
  close(err[1]);
  close(data[0]);
  close(ctl[1]);
  if (strcmp(what, "pipe") == 0) {
    let_it_block(ctl[0], pid);
    CHECK_EQ(write(data[1], "x", 1), 1);
  }
  char buf[4096];
  size_t len = 0;
  ssize_t n;
  while ((n = read(err[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)n;
  buf[len] = 0;
  int st;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  if (!have_start) {
    memcpy(start_err, buf, len + 1);
    have_start = 1;
  }
  CHECK(strcmp(buf, start_err) == 0, "%s: the scenario wrote to stderr:\n%s", what, buf);
  close(err[0]);
  close(data[1]);
  close(ctl[0]);
  return st;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "scenario") == 0) {
    data_fd = atoi(argv[3]);
    ctl_fd = atoi(argv[4]);
    return scenario(argv[2]);
  }
  struct {
    const char *what;
    int sig, code;
  } cases[] = {
      {"alarm", 0, 7},     {"alarm_dfl", SIGALRM, 0}, {"itimer", SIGALRM, 0}, {"timer", SIGALRM, 0},
      {"child", SIGTERM, 0}, {"pipe", 0, 0},           {"psem", 0, 0},
  };
  CHECK_EQ(run("start"), 0);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (argc > 1 && strcmp(argv[1], cases[i].what) != 0) continue;
    int st = run(cases[i].what);
    if (cases[i].sig)
      CHECK(WIFSIGNALED(st) && WTERMSIG(st) == cases[i].sig, "%s: status %#x, want signal %d",
            cases[i].what, st, cases[i].sig);
    else
      CHECK(WIFEXITED(st) && WEXITSTATUS(st) == cases[i].code, "%s: status %#x, want exit %d",
            cases[i].what, st, cases[i].code);
    printf("%s: ended as natively\n", cases[i].what);
  }
  return 0;
}
