/*
 * syscall(long number, ...): libc's variadic system call entry, interposed.
 *
 *   SYS_futex                        -> goshim_syscall_futex (core/futex: in-process)
 *   the fd calls (read, write, readv, writev, close, dup*, fcntl, connect,
 *   accept*, sendto, recvfrom, sendmsg, recvmsg)
 *                                    -> goshim_syscall_io (shim/syscall_io.cpp: the
 *                                       fd layer, as through their libc wrappers)
 *   SYS_mmap, SYS_mremap, SYS_shmat  -> goshim_syscall_mapping (the kernel, then
 *                                       core/memclass learns a mapping may be shared)
 *   SYS_exit_group                   -> goshim_syscall_exit (shim/process_exit.cpp:
 *                                       as _exit)
 *   SYS_io_uring_setup, SYS_io_uring_register
 *                                    -> goshim_syscall_io (a ring tied to the
 *                                       calling kernel thread binds the G to it)
 *   SYS_sched_setattr, SYS_sched_getattr
 *                                    -> goshim_syscall_io (a goroutine's own
 *                                       policy: shim/pthread_misc.cpp)
 *   SYS_kill, SYS_tkill, SYS_tgkill, SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo,
 *   SYS_pidfd_send_signal, SYS_rt_sigaction, SYS_rt_sigprocmask,
 *   SYS_rt_sigpending, SYS_rt_sigtimedwait, SYS_rt_sigsuspend, SYS_sigaltstack
 *                                    -> goshim_syscall_signal (shim/signal_thread.cpp:
 *                                       as their libc functions, in the kernel's ABI)
 *   anything else                    -> the kernel, exactly as glibc's stub does it
 *
 * The C entries (shim/syscall_futex.cpp) take seven longs: the number in
 * %rdi, the six arguments in %rsi, %rdx, %rcx, %r8, %r9 and at 8(%rsp); a
 * tail jump leaves all of them where the caller put them. They are weak
 * references: without them (the core unit tests link arch/ without shim/)
 * every number passes through. The pass-through path touches no stack, so
 * syscall(SYS_clone, ...) behaves as with glibc's stub.
 *
 *   -------------------------------------------------
 *   | caller   | %rdi nr | %rsi a1 | %rdx a2 | %rcx a3 |
 *   |          | %r8 a4  | %r9 a5  | 8(%rsp) a6         |
 *   | kernel   | %rax nr | %rdi a1 | %rsi a2 | %rdx a3 |
 *   |          | %r10 a4 | %r8 a5  | %r9 a6             |
 *   -------------------------------------------------
 */

#define SYS_mmap 9
#define SYS_mremap 25
#define SYS_shmat 30
#define SYS_futex 202
#define SYS_read 0
#define SYS_write 1
#define SYS_close 3
#define SYS_readv 19
#define SYS_writev 20
#define SYS_dup 32
#define SYS_dup2 33
#define SYS_connect 42
#define SYS_accept 43
#define SYS_sendto 44
#define SYS_recvfrom 45
#define SYS_sendmsg 46
#define SYS_recvmsg 47
#define SYS_fcntl 72
#define SYS_accept4 288
#define SYS_dup3 292
#define SYS_exit_group 231
#define SYS_io_uring_setup 425
#define SYS_io_uring_register 427
#define SYS_sched_setattr 314
#define SYS_sched_getattr 315
#define SYS_rt_sigaction 13
#define SYS_rt_sigprocmask 14
#define SYS_kill 62
#define SYS_rt_sigpending 127
#define SYS_sigaltstack 131
#define SYS_tkill 200
#define SYS_tgkill 234
#define SYS_rt_tgsigqueueinfo 297
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

	.text
	.globl	syscall
	.type	syscall,@function
	.p2align 4
syscall:
	.cfi_startproc
	cmpq	$SYS_futex, %rdi
	je	2f
	cmpq	$SYS_mmap, %rdi
	je	3f
	cmpq	$SYS_mremap, %rdi
	je	3f
	cmpq	$SYS_shmat, %rdi
	je	3f
	cmpq	$SYS_exit_group, %rdi
	je	6f
	cmpq	$SYS_rt_sigaction, %rdi		/* the signal calls */
	je	7f
	cmpq	$SYS_rt_sigprocmask, %rdi
	je	7f
	cmpq	$SYS_kill, %rdi
	je	7f
	cmpq	$SYS_rt_sigpending, %rdi		/* 127..131: rt_sigpending, */
	jb	8f				/* rt_sigtimedwait, rt_sigqueueinfo, */
	cmpq	$SYS_sigaltstack, %rdi		/* rt_sigsuspend, sigaltstack */
	jbe	7f
8:	cmpq	$SYS_tkill, %rdi
	je	7f
	cmpq	$SYS_tgkill, %rdi
	je	7f
	cmpq	$SYS_rt_tgsigqueueinfo, %rdi
	je	7f
	cmpq	$SYS_pidfd_send_signal, %rdi
	je	7f
	cmpq	$SYS_io_uring_setup, %rdi
	je	4f
	cmpq	$SYS_io_uring_register, %rdi
	je	4f
	cmpq	$SYS_sched_setattr, %rdi
	je	4f
	cmpq	$SYS_sched_getattr, %rdi
	je	4f
	cmpq	$SYS_dup3, %rdi			/* the fd calls: 0..47, 72, 288, 292 */
	ja	0f
	cmpq	$47, %rdi
	jbe	5f
	cmpq	$SYS_fcntl, %rdi
	je	4f
	cmpq	$SYS_accept4, %rdi
	je	4f
	cmpq	$SYS_dup3, %rdi
	je	4f
	jmp	0f
5:	movabsq	$0xfc030018000b, %rax		/* bits 0 1 3 19 20 32 33 42-47 */
	btq	%rdi, %rax
	jc	4f
0:	movq	%rdi, %rax			/* number */
	movq	%rsi, %rdi			/* a1 */
	movq	%rdx, %rsi			/* a2 */
	movq	%rcx, %rdx			/* a3 */
	movq	%r8, %r10			/* a4 */
	movq	%r9, %r8			/* a5 */
	movq	8(%rsp), %r9			/* a6 */
	syscall
	cmpq	$-4095, %rax
	jae	1f
	ret
1:	negl	%eax
	pushq	%rax				/* the error; aligns the stack for the call */
	.cfi_adjust_cfa_offset 8
	call	__errno_location@PLT
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	movl	%ecx, (%rax)			/* errno (the caller's TLS) */
	movq	$-1, %rax
	ret
2:	movq	goshim_syscall_futex@GOTPCREL(%rip), %rax
	testq	%rax, %rax
	jz	0b
	jmp	*%rax				/* tail call, all arguments in place */
3:	movq	goshim_syscall_mapping@GOTPCREL(%rip), %rax
	testq	%rax, %rax
	jz	0b
	jmp	*%rax
4:	movq	goshim_syscall_io@GOTPCREL(%rip), %rax
	testq	%rax, %rax
	jz	0b
	jmp	*%rax
6:	movq	goshim_syscall_exit@GOTPCREL(%rip), %rax
	testq	%rax, %rax
	jz	0b
	jmp	*%rax
7:	movq	goshim_syscall_signal@GOTPCREL(%rip), %rax
	testq	%rax, %rax
	jz	0b
	jmp	*%rax
	.cfi_endproc
	.size	syscall, .-syscall

	.section .note.GNU-stack,"",@progbits
