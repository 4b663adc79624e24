/* The classic thread-per-connection echo server (accept loop in main,
 * pthread_create per connection, blocking read/write), loaded by
 * echo_client (a separate native process with epoll, started here with
 * goshim's environment removed). Prints the client's RESULT lines
 * (requests/s, p50, p99) and the server's peak RSS and kernel threads.
 *   echo_server [conns=1000] [seconds=2] [msg=64] */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void *serve(void *arg) {
  int fd = (int)(long)arg;
  char buf[4096];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) break;
    if (write(fd, buf, (size_t)r) != r) break;
  }
  close(fd);
  return NULL;
}

static long status_val(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

int main(int argc, char **argv) {
  int nconn = argc > 1 ? atoi(argv[1]) : 1000;
  const char *secs = argc > 2 ? argv[2] : "2";
  const char *msg = argc > 3 ? argv[3] : "64";
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  setrlimit(RLIMIT_NOFILE, &rl);

  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 8192)) {
    perror("listen");
    return 1;
  }
  socklen_t sl = sizeof sa;
  getsockname(l, (struct sockaddr *)&sa, &sl);

  /* The client: next to this binary, without goshim in its environment.
   * Its exit closes the write end of `done`, which main waits on. */
  char client[4096];
  snprintf(client, sizeof client, "%s", argv[0]);
  char *slash = strrchr(client, '/');
  snprintf(slash ? slash + 1 : client, sizeof client - (slash ? slash + 1 - client : 0),
           "echo_client");
  char port[16], conns[16];
  snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
  snprintf(conns, sizeof conns, "%d", nconn);
  char *cargv[] = {client, port, conns, (char *)secs, (char *)msg, NULL};
  int nenv = 0;
  for (char **e = environ; *e; e++) nenv++;
  char **cenv = calloc(nenv + 1, sizeof *cenv);
  int k = 0;
  for (char **e = environ; *e; e++)
    if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "GOSHIM_", 7)) cenv[k++] = *e;
  int done[2];
  if (pipe2(done, O_CLOEXEC)) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, done[1], 3);
  pid_t pid;
  int err = posix_spawn(&pid, client, &fa, NULL, cargv, cenv);
  if (err) {
    fprintf(stderr, "cannot start %s: %s\n", client, strerror(err));
    return 1;
  }
  close(done[1]);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  for (int i = 0; i < nconn; i++) {
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      perror("accept");
      return 1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t t;
    if (pthread_create(&t, &attr, serve, (void *)(long)fd)) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  /* Wait for the client, sampling the kernel threads meanwhile. */
  long maxthreads = 0;
  for (;;) {
    long th = status_val("Threads:");
    if (th > maxthreads) maxthreads = th;
    struct pollfd p = {done[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) break;
  }
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "client failed\n");
    return 1;
  }
  printf("RESULT %.1f MB peak RSS of the server\n", status_val("VmHWM:") / 1024.0);
  printf("RESULT %ld kernel threads in the server (peak)\n", maxthreads);
  return 0;
}
