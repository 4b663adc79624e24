/* Memory freed by a burst of connections goes back to the system while
 * the process idles.
 *
 * A thread-per-connection server allocates large buffers for each
 * connection (MariaDB: statement memory, sort buffers) and frees them when
 * the connection closes; then the server may sit idle for hours. glibc
 * returns a block of 128 KiB or more to the kernel at free (it is a
 * mapping of its own). An allocator that keeps freed pages for reuse must
 * still give them back after a while, even when nothing allocates any
 * more.
 *
 * 32 threads each allocate 8 blocks of 256 KiB and write every page; once
 * all blocks exist (a barrier: glibc raises its mapping threshold at the
 * first such free), every thread frees its blocks and exits. The main
 * thread then watches the freed pages with mincore (an unmapped range
 * counts as not resident) and waits, polling every 0.1 s for at most 60 s
 * without allocating, until at most 1/8 of them are resident.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "dbmem_burst.h"

/* Page by page: part of a block may be unmapped (mincore: ENOMEM). */
static int mincore_present(uintptr_t a, void *ctx) {
  (void)ctx;
  unsigned char vec[1];
  if (mincore((void *)a, page, vec) == 0) return vec[0] & 1;
  CHECK(errno == ENOMEM, "mincore: %s", strerror(errno));
  return 0;
}

int main(void) {
  burst();
  long total = BURST_PAGES(page);
  long ceiling = total / 8, res = 0;
  /* A bounded poll for the allocator's effect (no allocation meanwhile). */
  struct timespec tenth = {0, 100 * 1000 * 1000};
  for (int i = 0; i < 600; i++) {
    res = burst_resident(mincore_present, NULL);
    if (res <= ceiling) break;
    nanosleep(&tenth, NULL);
  }
  if (res > ceiling)
    fprintf(stderr, "%ld of %ld freed pages still resident after 60 s idle (ceiling %ld)\n", res,
            total, ceiling);
  printf("%d threads freed %d MiB; back to the system while idle: %s\n", NTHREADS,
         NTHREADS * NBLOCKS * (BLOCK >> 10) >> 10, res <= ceiling ? "yes" : "no");
  return res <= ceiling ? 0 : 1;
}
