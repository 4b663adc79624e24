/*
 * syscall(long number, ...): libc's variadic system call entry, interposed
 * (aarch64 twin of arch/x86_64/syscall.S; the generic system call table).
 *
 *   SYS_futex                        -> goshim_syscall_futex (core/futex: in-process)
 *   the fd calls (read, write, readv, writev, close, dup, dup3, fcntl,
 *   connect, accept, accept4, sendto, recvfrom, sendmsg, recvmsg)
 *                                    -> goshim_syscall_io (shim/syscall_io.cpp)
 *   SYS_mmap, SYS_mremap, SYS_shmat  -> goshim_syscall_mapping
 *   SYS_exit_group                   -> goshim_syscall_exit (as _exit)
 *   SYS_io_uring_setup, SYS_io_uring_register, SYS_sched_setattr,
 *   SYS_sched_getattr -> goshim_syscall_io
 *   SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo,
 *   SYS_pidfd_send_signal, SYS_rt_sigaction, SYS_rt_sigprocmask,
 *   SYS_rt_sigpending, SYS_rt_sigtimedwait, SYS_rt_sigsuspend, SYS_sigaltstack
 *                                    -> goshim_syscall_signal (shim/signal_thread.cpp)
 *   anything else                    -> the kernel, exactly as glibc's stub does it
 *
 * AAPCS64 passes variadic arguments like named ones: the number in x0, the
 * six arguments in x1-x6. The C entries take seven longs, so a tail branch
 * leaves all of them in place. The kernel takes the number in x8 and the
 * arguments in x0-x5. The entries are weak references (the core unit tests
 * link arch/ without shim/); the pass-through path touches no stack.
 */

#define SYS_dup 23
#define SYS_dup3 24
#define SYS_fcntl 25
#define SYS_close 57
#define SYS_read 63
#define SYS_write 64
#define SYS_readv 65
#define SYS_writev 66
#define SYS_futex 98
#define SYS_shmat 196
#define SYS_accept 202
#define SYS_connect 203
#define SYS_sendto 206
#define SYS_recvfrom 207
#define SYS_sendmsg 211
#define SYS_recvmsg 212
#define SYS_mremap 216
#define SYS_mmap 222
#define SYS_accept4 242
#define SYS_exit_group 94
#define SYS_io_uring_setup 425
#define SYS_io_uring_register 427
#define SYS_sched_setattr 274
#define SYS_sched_getattr 275
#define SYS_kill 129
#define SYS_rt_sigqueueinfo 138
#define SYS_rt_tgsigqueueinfo 240
#define SYS_pidfd_send_signal 424

	.weak	goshim_syscall_futex
	.hidden	goshim_syscall_futex
	.weak	goshim_syscall_mapping
	.hidden	goshim_syscall_mapping
	.weak	goshim_syscall_io
	.hidden	goshim_syscall_io
	.weak	goshim_syscall_exit
	.hidden	goshim_syscall_exit
	.weak	goshim_syscall_signal
	.hidden	goshim_syscall_signal

	.macro TO nr, label
	cmp	x0, #\nr
	b.eq	\label
	.endm

	.text
	.globl	syscall
	.type	syscall,%function
	.p2align 4
syscall:
	.cfi_startproc
	TO	SYS_futex, 2f
	TO	SYS_mmap, 3f
	TO	SYS_mremap, 3f
	TO	SYS_shmat, 3f
	TO	SYS_exit_group, 6f
	sub	x9, x0, #SYS_kill	/* the signal calls: 129..138 (kill, tkill, */
	cmp	x9, #(SYS_rt_sigqueueinfo - SYS_kill)	/* tgkill, sigaltstack, */
	b.ls	7f			/* rt_sigsuspend, rt_sigaction, rt_sigprocmask, */
	TO	SYS_rt_tgsigqueueinfo, 7f	/* rt_sigpending, rt_sigtimedwait, */
	TO	SYS_pidfd_send_signal, 7f	/* rt_sigqueueinfo) */
	TO	SYS_read, 4f
	TO	SYS_write, 4f
	TO	SYS_readv, 4f
	TO	SYS_writev, 4f
	TO	SYS_close, 4f
	TO	SYS_dup, 4f
	TO	SYS_dup3, 4f
	TO	SYS_fcntl, 4f
	TO	SYS_connect, 4f
	TO	SYS_accept, 4f
	TO	SYS_accept4, 4f
	TO	SYS_sendto, 4f
	TO	SYS_recvfrom, 4f
	TO	SYS_sendmsg, 4f
	TO	SYS_recvmsg, 4f
	TO	SYS_io_uring_setup, 4f
	TO	SYS_io_uring_register, 4f
	TO	SYS_sched_setattr, 4f
	TO	SYS_sched_getattr, 4f
0:	mov	x8, x0			/* number */
	mov	x0, x1			/* a1 .. a6 */
	mov	x1, x2
	mov	x2, x3
	mov	x3, x4
	mov	x4, x5
	mov	x5, x6
	svc	#0
	cmn	x0, #4095
	b.cs	1f
	ret
1:	stp	x29, x30, [sp, #-32]!
	.cfi_adjust_cfa_offset 32
	.cfi_rel_offset x29, 0
	.cfi_rel_offset x30, 8
	mov	x29, sp
	neg	x0, x0
	str	x0, [sp, #16]		/* the error */
	bl	__errno_location
	ldr	x1, [sp, #16]
	str	w1, [x0]		/* errno (the caller's TLS) */
	mov	x0, #-1
	ldp	x29, x30, [sp], #32
	.cfi_adjust_cfa_offset -32
	.cfi_restore x29
	.cfi_restore x30
	ret
2:	adrp	x9, :got:goshim_syscall_futex
	ldr	x9, [x9, :got_lo12:goshim_syscall_futex]
	cbz	x9, 0b
	br	x9			/* tail call, all arguments in place */
3:	adrp	x9, :got:goshim_syscall_mapping
	ldr	x9, [x9, :got_lo12:goshim_syscall_mapping]
	cbz	x9, 0b
	br	x9
4:	adrp	x9, :got:goshim_syscall_io
	ldr	x9, [x9, :got_lo12:goshim_syscall_io]
	cbz	x9, 0b
	br	x9
6:	adrp	x9, :got:goshim_syscall_exit
	ldr	x9, [x9, :got_lo12:goshim_syscall_exit]
	cbz	x9, 0b
	br	x9
7:	adrp	x9, :got:goshim_syscall_signal
	ldr	x9, [x9, :got_lo12:goshim_syscall_signal]
	cbz	x9, 0b
	br	x9
	.cfi_endproc
	.size	syscall, .-syscall

	.section .note.GNU-stack,"",%progbits
