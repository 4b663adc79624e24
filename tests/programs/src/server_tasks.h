/* A server's kernel threads, /proc/PID/task: its own (returned) and the
 * kernel's io_uring workers (iou-wrk-PID, in *iowq): those the kernel
 * starts for requests it cannot complete inline, natively too, and their
 * number follows the I/O load; no thread of the program's creation.
 * taskpath: "/proc/PID/task". -1 if it cannot be read. */
#pragma once
#include <dirent.h>
#include <stdio.h>
#include <string.h>

static int count_server_tasks(const char *taskpath, int *iowq) {
  DIR *d = opendir(taskpath);
  *iowq = 0;
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[384], name[20] = "";
    snprintf(p, sizeof p, "%s/%s/comm", taskpath, e->d_name);
    FILE *f = fopen(p, "r");
    if (f) {
      if (!fgets(name, sizeof name, f)) name[0] = 0;
      fclose(f);
    }
    if (!strncmp(name, "iou-wrk-", 8)) ++*iowq;
    else n++;
  }
  closedir(d);
  return n;
}
