/* The static TLS layout of this process as ld.so laid it out: for every
 * loaded module with a PT_TLS segment, its module id, where its block
 * lies relative to the calling thread's thread pointer (dlpi_tls_data),
 * its sizes and alignment, and the runs of non-zero bytes in its
 * initialization image (what must be written into a fresh, zero block).
 * Also the static TLS totals (sysconf-free: the extent of the modules seen,
 * and glibc's _dl_get_tls_static_info when it can be found) and, on a
 * second thread, where its modules lie (the same offsets in every thread
 * of the process: ld.so fixes them once).
 *   tls_layout */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uintptr_t get_tp(void) {
#if defined(__x86_64__)
  uintptr_t tp;
  __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
  return tp;
#elif defined(__aarch64__)
  uintptr_t tp;
  __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
#else
  return 0;
#endif
}

static __thread int own_tls = 1; /* this program's own module */

static int show(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  uintptr_t tp = *(uintptr_t *)ctx;
  const ElfW(Phdr) *ph = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_TLS) ph = &info->dlpi_phdr[i];
  if (!ph) return 0;
  const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "(program)";
  long off = info->dlpi_tls_data ? (long)((uintptr_t)info->dlpi_tls_data - tp) : 0;
  printf("modid %2zu  tp%+6ld .. tp%+6ld  memsz %5zu filesz %5zu align %3zu  %s\n",
         info->dlpi_tls_modid, off, off + (long)ph->p_memsz, (size_t)ph->p_memsz,
         (size_t)ph->p_filesz, (size_t)ph->p_align, name);
  /* Non-zero runs of the image (filesz bytes). */
  const unsigned char *img = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
  size_t nz = 0, runs = 0;
  for (size_t i = 0; i < ph->p_filesz;) {
    if (!img[i]) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < ph->p_filesz && img[j]) j++;
    /* merge runs closer than 16 bytes */
    size_t k = j;
    for (;;) {
      size_t z = k;
      while (z < ph->p_filesz && !img[z] && z - k < 16) z++;
      if (z < ph->p_filesz && img[z] && z - k < 16) {
        k = z;
        while (k < ph->p_filesz && img[k]) k++;
      } else
        break;
    }
    printf("      image non-zero [%zu, %zu) = tp%+ld .. tp%+ld\n", i, k, off + (long)i, off + (long)k);
    nz += k - i;
    runs++;
    i = k;
  }
  if (ph->p_filesz) printf("      %zu non-zero bytes in %zu runs of %zu\n", nz, runs, (size_t)ph->p_filesz);
  return 0;
}

static void *second(void *arg) {
  (void)arg;
  uintptr_t tp = get_tp();
  printf("second thread: tp %#lx, own TLS at tp%+ld\n", (unsigned long)tp,
         (long)((uintptr_t)&own_tls - tp));
  dl_iterate_phdr(show, &tp);
  return NULL;
}

int main(void) {
  uintptr_t tp = get_tp();
  printf("main thread: tp %#lx, own TLS at tp%+ld, errno at tp%+ld\n", (unsigned long)tp,
         (long)((uintptr_t)&own_tls - tp), (long)((uintptr_t)&errno - tp));
  void (*info)(size_t *, size_t *) =
      (void (*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "_dl_get_tls_static_info");
  if (info) {
    size_t sz = 0, al = 0;
    info(&sz, &al);
    printf("_dl_get_tls_static_info: size %zu align %zu\n", sz, al);
  }
  /* sizeof(struct pthread), from glibc's libthread_db symbol (in libc since
     glibc 2.34, in libpthread before). */
  const unsigned *szp = (const unsigned *)dlsym(RTLD_DEFAULT, "_thread_db_sizeof_pthread");
  if (szp) printf("sizeof(struct pthread): %u\n", szp[0]);
  dl_iterate_phdr(show, &tp);
  pthread_t t;
  if (pthread_create(&t, NULL, second, NULL) == 0) pthread_join(t, NULL);
  return 0;
}
