/* An iconv (gconv) module with initial-exec TLS, loaded by glibc itself
 * (iconv_open's __libc_dlopen, not the program's dlopen) for iconv_tls,
 * which names it in a gconv-modules file under GCONV_PATH: conversion
 * GOSHIMTLS// -> GOSHIMQUAD//. Every input byte becomes four output bytes:
 * the byte, the two low bytes of an initial-exec TLS variable initialized
 * to 0x5a5a, and a per-thread count of the bytes this thread converted so
 * far (another initial-exec TLS variable): what the module read of its
 * TLS, for the program to check. */
#include <gconv.h>
#include <stddef.h>

__thread int gconv_ie_magic __attribute__((tls_model("initial-exec"))) = 0x5a5a;
__thread unsigned gconv_ie_count __attribute__((tls_model("initial-exec")));

int gconv_init(struct __gconv_step *step) {
  step->__min_needed_from = 1;
  step->__max_needed_from = 1;
  step->__min_needed_to = 4;
  step->__max_needed_to = 4;
  step->__stateful = 0;
  step->__data = NULL;
  return __GCONV_OK;
}

void gconv_end(struct __gconv_step *step) { (void)step; }

int gconv(struct __gconv_step *step, struct __gconv_step_data *data, const unsigned char **inptrp,
          const unsigned char *inend, unsigned char **outbufstart, size_t *irreversible,
          int do_flush, int consume_incomplete) {
  (void)step;
  (void)irreversible;
  (void)consume_incomplete;
  /* gconv-modules names this module alone for its pair: the only step. */
  if (!(data->__flags & __GCONV_IS_LAST)) return __GCONV_NOCONV;
  if (do_flush) return __GCONV_OK; /* stateless: nothing to emit */
  unsigned char *out = outbufstart ? *outbufstart : data->__outbuf;
  unsigned char *outend = data->__outbufend;
  const unsigned char *in = *inptrp;
  int status = __GCONV_EMPTY_INPUT;
  while (in < inend) {
    if (outend - out < 4) {
      status = __GCONV_FULL_OUTPUT;
      break;
    }
    out[0] = *in++;
    out[1] = (unsigned char)(gconv_ie_magic & 0xff);
    out[2] = (unsigned char)((gconv_ie_magic >> 8) & 0xff);
    out[3] = (unsigned char)gconv_ie_count++;
    out += 4;
  }
  *inptrp = in;
  if (outbufstart)
    *outbufstart = out;
  else
    data->__outbuf = out;
  ++data->__invocation_counter;
  return status;
}
