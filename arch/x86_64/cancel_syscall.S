/*
 * long goshim_cancellable_syscall(const int* ch, long nr, long a1, long a2,
 *                                 long a3, long a4, long a5, long a6)
 *
 * A raw system call (returns -errno, like sys::raw*) that is a cancellation
 * point of the calling goroutine: ch points to its cancelhandling word (or
 * to a zero word when the call is not one). Modelled on the contract of
 * glibc 2.41's __syscall_cancel_arch:
 *   - if the cancellation is already pending (enabled, canceled, not
 *     exiting: (*ch & 0x19) == 0x08) it returns -EINTR without the call;
 *   - every instruction from goshim_cancel_sc_start up to the syscall
 *     instruction itself (where the kernel puts a call it will restart)
 *     lies before goshim_cancel_sc_end: the SIGCANCEL handler
 *     (core/signal.cpp) ends a call interrupted there with -EINTR (resumes
 *     at goshim_cancel_sc_end with %rax = -EINTR); at goshim_cancel_sc_end
 *     the call has completed and is left alone.
 * The caller leaves its blocking section normally and then acts on the
 * cancellation.
 *
 *   | caller | %rdi ch | %rsi nr | %rdx a1 | %rcx a2 | %r8 a3 | %r9 a4 |
 *   |        | 8(%rsp) a5 | 16(%rsp) a6                               |
 */
	.text
	.globl goshim_cancellable_syscall
	.globl goshim_cancel_sc_start
	.globl goshim_cancel_sc_end
	.hidden goshim_cancellable_syscall
	.hidden goshim_cancel_sc_start
	.hidden goshim_cancel_sc_end
	.type goshim_cancellable_syscall, @function
	.p2align 4
goshim_cancellable_syscall:
	.cfi_startproc
goshim_cancel_sc_start:
	mov	(%rdi), %eax
	and	$0x19, %eax
	cmp	$0x08, %eax
	je	1f
	mov	%rsi, %rax
	mov	%rdx, %rdi
	mov	%rcx, %rsi
	mov	%r8, %rdx
	mov	%r9, %r10
	mov	8(%rsp), %r8
	mov	16(%rsp), %r9
	syscall
goshim_cancel_sc_end:
	ret
1:	mov	$-4, %rax	/* -EINTR */
	ret
	.cfi_endproc
	.size goshim_cancellable_syscall, . - goshim_cancellable_syscall

	.section .note.GNU-stack, "", @progbits
