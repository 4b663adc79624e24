/*
 * long goshim_cancellable_syscall(const int* ch, long nr, long a1, long a2,
 *                                 long a3, long a4, long a5, long a6)
 *
 * aarch64 twin of arch/x86_64/cancel_syscall.S (same contract): a raw
 * system call (returns -errno) that is a cancellation point of the calling
 * goroutine. If the cancellation is already pending ((*ch & 0x19) ==
 * 0x08) it returns -EINTR without the call; the SIGCANCEL handler
 * (core/signal.cpp) ends a call interrupted anywhere from
 * goshim_cancel_sc_start up to the svc instruction itself with -EINTR
 * (resumes at goshim_cancel_sc_end with x0 = -EINTR).
 *
 *   | caller | x0 ch | x1 nr | x2 a1 | x3 a2 | x4 a3 | x5 a4 | x6 a5 | x7 a6 |
 */
	.text
	.globl goshim_cancellable_syscall
	.globl goshim_cancel_sc_start
	.globl goshim_cancel_sc_end
	.hidden goshim_cancellable_syscall
	.hidden goshim_cancel_sc_start
	.hidden goshim_cancel_sc_end
	.type goshim_cancellable_syscall, %function
	.p2align 4
goshim_cancellable_syscall:
	.cfi_startproc
goshim_cancel_sc_start:
	ldr	w9, [x0]
	mov	w10, #0x19		/* not a logical immediate */
	and	w9, w9, w10
	cmp	w9, #0x08
	b.eq	1f
	mov	x8, x1
	mov	x0, x2
	mov	x1, x3
	mov	x2, x4
	mov	x3, x5
	mov	x4, x6
	mov	x5, x7
	svc	#0
goshim_cancel_sc_end:
	ret
1:	mov	x0, #-4		/* -EINTR */
	ret
	.cfi_endproc
	.size goshim_cancellable_syscall, . - goshim_cancellable_syscall

	.section .note.GNU-stack, "", %progbits
