/* getaddrinfo, system() and popen from many threads at once. */
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include "common.h"

#define THREADS 24

static void *worker(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < 3; i++) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo("localhost", "80", &hints, &res);
    CHECK(e == 0 && res, "getaddrinfo: %s", gai_strerror(e));
    freeaddrinfo(res);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "exit %ld", id % 7);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == id % 7, "system(%s) = %d", cmd, st);
    FILE *f = popen("echo hello", "r");
    CHECK(f != NULL, "popen");
    char line[32] = {0};
    CHECK(fgets(line, sizeof line, f) != NULL, "popen read");
    CHECK(strcmp(line, "hello\n") == 0, "popen output %s", line);
    CHECK_EQ(pclose(f), 0);
  }
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
  for (int i = 0; i < THREADS; i++) CHECK_EQ(pthread_join(t[i], NULL), 0);
  printf("getaddrinfo, system and popen from %d threads ok\n", THREADS);
  return 0;
}
