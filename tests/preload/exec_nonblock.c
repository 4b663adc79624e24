/* Children must find the pipes and sockets they inherit in the mode the
 * program set (blocking), whatever a runtime does underneath. Each case
 * first has a thread block reading the pipe or socket (so that a runtime
 * multiplexing I/O would have switched it to O_NONBLOCK), then starts a
 * child that does a blocking read of it while the parent writes only
 * once every thread of the child sleeps (in its read): a child given a
 * non-blocking fd would get EAGAIN. No sleep orders anything: the reader
 * thread publishes its kernel thread id and the parent waits for it to
 * sleep (/proc state S).
 *   1. fork + dup2 onto stdin + execlp("sh", "-c", "read x; echo ..."),
 *   2. fork + execv of this program reading an inherited pipe by number,
 *   3. the same with a socketpair end,
 *   4. posix_spawn with dup2 file actions (stdin and stdout),
 *   5. posix_spawn inheriting a pipe by number, no file action,
 *   6. fork + dup2 of a socketpair end onto stdin and stdout + exec sh,
 *   7. vfork + close in the child + exec: the parent's fds are unharmed
 *      and a thread blocked reading one of them gets its data,
 *   8. a failed exec: the program goes on and its I/O still works. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

extern char **environ;

/* Child mode: "--readfd N": report N's mode, then one blocking read. */
static int child_readfd(int fd) {
  int fl = fcntl(fd, F_GETFL);
  char buf[64];
  ssize_t r = read(fd, buf, sizeof buf);
  printf("child fd: nonblock=%d read=%zd '%.*s'\n", (fl & O_NONBLOCK) != 0, r,
         (int)(r > 0 ? r - 1 : 0), buf);
  return r > 0 ? 0 : 1;
}

struct reader {
  int fd;
  char buf[64];
  ssize_t r;
  int tid, done; /* set just before / after the read */
};

static void *read_once(void *arg) {
  struct reader *rd = arg;
  __atomic_store_n(&rd->tid, self_tid(), __ATOMIC_RELEASE);
  rd->r = read(rd->fd, rd->buf, sizeof rd->buf);
  __atomic_store_n(&rd->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Returns once the reader sleeps in its read (or its read returned). */
static void wait_reader_blocked(struct reader *rd) {
  wait_flag(&rd->tid);
  wait_tid_asleep(__atomic_load_n(&rd->tid, __ATOMIC_ACQUIRE), &rd->done);
}

/* A thread blocks reading fd until the main thread writes into wfd. */
static void block_a_reader_on(int fd, int wfd) {
  struct reader rd = {.fd = fd};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, read_once, &rd) == 0, "create");
  wait_reader_blocked(&rd);
  CHECK(write(wfd, "x", 1) == 1, "write x");
  pthread_join(t, NULL);
  CHECK(rd.r == 1 && rd.buf[0] == 'x', "reader got %zd", rd.r);
}

/* Reads everything from fd until EOF, returns it (without the final \n). */
static void slurp(int fd, char *out, size_t size) {
  size_t n = 0;
  ssize_t r;
  while (n + 1 < size && (r = read(fd, out + n, size - 1 - n)) > 0) n += (size_t)r;
  while (n > 0 && out[n - 1] == '\n') n--;
  out[n] = 0;
}

static int wait_child(pid_t pid) {
  int st;
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *self;

/* 1 */
static void fork_dup2_sh(void) {
  int in[2], out[2];
  CHECK(pipe(in) == 0 && pipe(out) == 0, "pipe");
  block_a_reader_on(in[0], in[1]);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]);
    close(in[1]);
    close(out[0]);
    close(out[1]);
    execlp("sh", "sh", "-c", "read x; echo \"sh read: $x\"", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  wait_all_asleep(pid);
  CHECK(write(in[1], "line one\n", 9) == 9, "write");
  char got[128];
  slurp(out[0], got, sizeof got);
  printf("fork+dup2+execlp: '%s' status %d\n", got, wait_child(pid));
  close(in[1]);
  close(out[0]);
}

/* 2 and 3: fd (kept blocked-on by a reader first) inherited by number. */
static void fork_exec_readfd(const char *what, int fd, int wfd) {
  block_a_reader_on(fd, wfd);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    char num[16];
    snprintf(num, sizeof num, "%d", fd);
    char *argv[] = {(char *)self, "--readfd", num, NULL};
    execv(self, argv);
    _exit(127);
  }
  wait_all_asleep(pid);
  CHECK(write(wfd, "payload\n", 8) == 8, "write");
  int st = wait_child(pid);
  printf("fork+execv (%s): status %d\n", what, st);
}

/* 4 */
static void spawn_dup2(void) {
  int in[2], out[2];
  CHECK(pipe(in) == 0 && pipe(out) == 0, "pipe");
  block_a_reader_on(in[0], in[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  char *argv[] = {"sh", "-c", "read x; echo \"spawned sh read: $x\"", NULL};
  pid_t pid;
  CHECK(posix_spawnp(&pid, "sh", &fa, NULL, argv, environ) == 0, "posix_spawnp");
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  wait_all_asleep(pid);
  CHECK(write(in[1], "line two\n", 9) == 9, "write");
  char got[128];
  slurp(out[0], got, sizeof got);
  printf("posix_spawnp+adddup2: '%s' status %d\n", got, wait_child(pid));
  close(in[1]);
  close(out[0]);
}

/* 5 */
static void spawn_inherit(void) {
  int in[2];
  CHECK(pipe(in) == 0, "pipe");
  block_a_reader_on(in[0], in[1]);
  fflush(stdout);
  char num[16];
  snprintf(num, sizeof num, "%d", in[0]);
  char *argv[] = {(char *)self, "--readfd", num, NULL};
  pid_t pid;
  CHECK(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0, "posix_spawn");
  wait_all_asleep(pid);
  CHECK(write(in[1], "inherited\n", 10) == 10, "write");
  printf("posix_spawn inheriting fd: status %d\n", wait_child(pid));
  /* The parent's own blocking I/O on the pipe still works. */
  block_a_reader_on(in[0], in[1]);
  close(in[0]);
  close(in[1]);
}

/* 6 */
static void fork_socket_sh(void) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  block_a_reader_on(sv[1], sv[0]);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    dup2(sv[1], 0);
    dup2(sv[1], 1);
    close(sv[0]);
    close(sv[1]);
    execlp("sh", "sh", "-c", "read x; echo \"sh on a socket read: $x\"", (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  wait_all_asleep(pid);
  CHECK(write(sv[0], "line three\n", 11) == 11, "write");
  char got[128];
  slurp(sv[0], got, sizeof got);
  printf("fork+socketpair+execlp: '%s' status %d\n", got, wait_child(pid));
  close(sv[0]);
}

/* 7 */
static void vfork_close(void) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  struct reader rd = {.fd = sv[1]};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, read_once, &rd) == 0, "create");
  wait_reader_blocked(&rd);
  pid_t pid = vfork();
  CHECK(pid >= 0, "vfork");
  if (pid == 0) {
    close(sv[0]);
    close(sv[1]);
    execl("/bin/true", "true", (char *)NULL);
    _exit(127);
  }
  int st = wait_child(pid);
  CHECK(write(sv[0], "v", 1) == 1, "write after vfork: %s", strerror(errno));
  pthread_join(t, NULL);
  printf("vfork child closed its copies: status %d, blocked reader got %zd '%c'\n", st, rd.r,
         rd.r > 0 ? rd.buf[0] : '?');
  close(sv[0]);
  close(sv[1]);
}

/* 8 */
static void failed_exec(void) {
  int in[2];
  CHECK(pipe(in) == 0, "pipe");
  block_a_reader_on(in[0], in[1]);
  int r = execl("/nonexistent/program", "program", (char *)NULL);
  printf("failed execl: %d %s\n", r, errno == ENOENT ? "ENOENT" : strerror(errno));
  block_a_reader_on(in[0], in[1]);
  int fl = fcntl(in[0], F_GETFL);
  printf("after the failed exec: nonblock=%d\n", (fl & O_NONBLOCK) != 0);
  close(in[0]);
  close(in[1]);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--readfd") == 0) return child_readfd(atoi(argv[2]));
  self = argv[0];
  setvbuf(stdout, NULL, _IOLBF, 0);
  fork_dup2_sh();
  int p[2];
  CHECK(pipe(p) == 0, "pipe");
  fork_exec_readfd("pipe", p[0], p[1]);
  close(p[0]);
  close(p[1]);
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  fork_exec_readfd("socketpair", sv[1], sv[0]);
  close(sv[0]);
  close(sv[1]);
  spawn_dup2();
  spawn_inherit();
  fork_socket_sh();
  vfork_close();
  failed_exec();
  printf("done\n");
  return 0;
}
