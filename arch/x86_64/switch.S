/*
 * goshim context switch, x86-64 System V, ELF, GNU as.
 *
 * A switched-out context is a frame on its own stack; the G keeps only its
 * stack pointer (G::sched_sp, offset 0 of struct G). Frame layout:
 *
 *   -------------------------------------------------------
 *   | sp+0x00 | MXCSR (4 bytes) | x87 CW (2) | pad (2)    |
 *   | sp+0x08 | R15                                       |
 *   | sp+0x10 | R14                                       |
 *   | sp+0x18 | R13                                       |
 *   | sp+0x20 | R12                                       |
 *   | sp+0x28 | RBX                                       |
 *   | sp+0x30 | RBP                                       |
 *   | sp+0x38 | RIP (return address)                      |
 *   -------------------------------------------------------
 *
 * The thread pointer (%fs base) moves with the stack: wrfsbase when the
 * CPU and kernel allow it (goshim_arch_fsgsbase != 0), arch_prctl
 * otherwise. core/gmp.hpp static_asserts the offsets used here.
 */

#define FRAME_SIZE 0x38
#define ARCH_SET_FS 0x1002
#define SYS_arch_prctl 158

	.text

/*
 * void goshim_mcall(G *gp, void (*fn)(G *), uintptr_t g0_sp, uintptr_t g0_tp)
 *
 * Called on a user G. Saves the G's context into gp->sched_sp, switches to
 * the M's g0 stack and thread pointer and calls fn(gp), which never returns.
 * When the G is resumed (goshim_gogo), goshim_mcall returns to its caller.
 */
	.globl	goshim_mcall
	.hidden	goshim_mcall
	.type	goshim_mcall,@function
	.p2align 4
goshim_mcall:
	.cfi_startproc
	pushq	%rbp			/* save RBP */
	.cfi_adjust_cfa_offset 8
	pushq	%rbx			/* save RBX */
	.cfi_adjust_cfa_offset 8
	pushq	%r12			/* save R12 */
	.cfi_adjust_cfa_offset 8
	pushq	%r13			/* save R13 */
	.cfi_adjust_cfa_offset 8
	pushq	%r14			/* save R14 */
	.cfi_adjust_cfa_offset 8
	pushq	%r15			/* save R15 */
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp		/* room for MXCSR and x87 CW */
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)			/* save MXCSR */
	fnstcw	4(%rsp)			/* save x87 control word */
	movq	%rsp, (%rdi)		/* gp->sched_sp = rsp */
	movq	%rdx, %rsp		/* switch to the g0 stack */
	.globl	goshim_mcall_mid
	.hidden	goshim_mcall_mid
goshim_mcall_mid:
	.cfi_undefined rip		/* unwinders stop here on g0 */
	cmpb	$0, goshim_arch_fsgsbase(%rip)
	je	1f
	wrfsbase %rcx			/* thread pointer = g0's TLS block */
	jmp	2f
1:	movq	%rdi, %r8		/* arch_prctl(ARCH_SET_FS, g0_tp) */
	movq	%rsi, %r9
	movq	%rcx, %rsi
	movl	$ARCH_SET_FS, %edi
	movl	$SYS_arch_prctl, %eax
	syscall
	movq	%r8, %rdi
	movq	%r9, %rsi
2:
	.globl	goshim_mcall_mid_end
	.hidden	goshim_mcall_mid_end
goshim_mcall_mid_end:
	callq	*%rsi			/* fn(gp): never returns */
	ud2
	.cfi_endproc
	.size	goshim_mcall,.-goshim_mcall

/*
 * void goshim_gogo(uintptr_t sp, uintptr_t tp)
 *
 * Called on g0. Installs the thread pointer tp and resumes the context
 * saved at sp (by goshim_mcall or built by goshim_frame_init). Never returns.
 */
	.globl	goshim_gogo
	.hidden	goshim_gogo
	.type	goshim_gogo,@function
	.p2align 4
goshim_gogo:
	.cfi_startproc
	.cfi_undefined rip
	cmpb	$0, goshim_arch_fsgsbase(%rip)
	je	1f
	wrfsbase %rsi			/* thread pointer = the G's TLS block */
	jmp	2f
1:	movq	%rdi, %r8		/* arch_prctl(ARCH_SET_FS, tp) */
	movl	$ARCH_SET_FS, %edi
	movl	$SYS_arch_prctl, %eax
	syscall
	movq	%r8, %rdi
2:	movq	%rdi, %rsp		/* switch to the G's stack */
	.globl	goshim_gogo_mid_end
	.hidden	goshim_gogo_mid_end
goshim_gogo_mid_end:
	stmxcsr	-8(%rsp)		/* current MXCSR (red zone) */
	movl	(%rsp), %eax
	cmpl	-8(%rsp), %eax
	je	3f
	ldmxcsr	(%rsp)			/* restore MXCSR (only if it differs) */
3:	fnstcw	-8(%rsp)		/* current x87 control word */
	movw	4(%rsp), %ax
	cmpw	-8(%rsp), %ax
	je	4f
	fldcw	4(%rsp)			/* restore x87 CW (only if it differs) */
4:	addq	$8, %rsp
	popq	%r15			/* restore R15 */
	popq	%r14			/* restore R14 */
	popq	%r13			/* restore R13 */
	popq	%r12			/* restore R12 */
	popq	%rbx			/* restore RBX */
	popq	%rbp			/* restore RBP */
	ret				/* jump to the saved RIP */
	.cfi_endproc
	.size	goshim_gogo,.-goshim_gogo

/*
 * void goshim_switch(G *from, uintptr_t to_sp, uintptr_t to_tp, void (*post)(G *from))
 *
 * Called on a user G: a direct hand-off to another G, without going
 * through g0. Saves from's context into from->sched_sp (the frame
 * goshim_mcall builds), switches to the stack and thread pointer of the
 * context saved at to_sp, calls post(from) there (below that saved frame,
 * with the new G's TLS) and, when post returns, resumes that context as
 * goshim_gogo does. post may also not return (it resumes another context).
 * When from is resumed later, goshim_switch returns to its caller.
 */
	.globl	goshim_switch
	.hidden	goshim_switch
	.type	goshim_switch,@function
	.p2align 4
goshim_switch:
	.cfi_startproc
	pushq	%rbp			/* save RBP */
	.cfi_adjust_cfa_offset 8
	pushq	%rbx			/* save RBX */
	.cfi_adjust_cfa_offset 8
	pushq	%r12			/* save R12 */
	.cfi_adjust_cfa_offset 8
	pushq	%r13			/* save R13 */
	.cfi_adjust_cfa_offset 8
	pushq	%r14			/* save R14 */
	.cfi_adjust_cfa_offset 8
	pushq	%r15			/* save R15 */
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp		/* room for MXCSR and x87 CW */
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)			/* save MXCSR */
	fnstcw	4(%rsp)			/* save x87 control word */
	movq	%rsp, (%rdi)		/* from->sched_sp = rsp */
	movq	%rsi, %rsp		/* the new G's stack, at its saved frame (16-aligned) */
	.globl	goshim_switch_mid
	.hidden	goshim_switch_mid
goshim_switch_mid:
	.cfi_undefined rip
	cmpb	$0, goshim_arch_fsgsbase(%rip)
	je	1f
	wrfsbase %rdx			/* thread pointer = the new G's TLS block */
	jmp	2f
1:	movq	%rdi, %r8		/* arch_prctl(ARCH_SET_FS, to_tp) */
	movq	%rcx, %r9
	movq	%rdx, %rsi
	movl	$ARCH_SET_FS, %edi
	movl	$SYS_arch_prctl, %eax
	syscall
	movq	%r8, %rdi
	movq	%r9, %rcx
2:
	.globl	goshim_switch_mid_end
	.hidden	goshim_switch_mid_end
goshim_switch_mid_end:
	callq	*%rcx			/* post(from), below the saved frame */
	stmxcsr	-8(%rsp)		/* then resume the frame at rsp, as goshim_gogo */
	movl	(%rsp), %eax
	cmpl	-8(%rsp), %eax
	je	3f
	ldmxcsr	(%rsp)			/* restore MXCSR (only if it differs) */
3:	fnstcw	-8(%rsp)
	movw	4(%rsp), %ax
	cmpw	-8(%rsp), %ax
	je	4f
	fldcw	4(%rsp)			/* restore x87 CW (only if it differs) */
4:	addq	$8, %rsp
	popq	%r15			/* restore R15 */
	popq	%r14			/* restore R14 */
	popq	%r13			/* restore R13 */
	popq	%r12			/* restore R12 */
	popq	%rbx			/* restore RBX */
	popq	%rbp			/* restore RBP */
	ret				/* jump to the saved RIP */
	.cfi_endproc
	.size	goshim_switch,.-goshim_switch

/*
 * First code a new G runs: goshim_frame_init stores entry in R13 and its
 * argument in R12 and makes this the frame's return address. The stack is
 * 16-byte aligned here, so the call below gives entry a standard frame.
 * The undefined RIP marks the outermost frame for every unwinder (libgcc's
 * forced unwind for pthread_exit, libunwind, gdb).
 */
	.globl	goshim_gstart
	.hidden	goshim_gstart
	.type	goshim_gstart,@function
	.p2align 4
goshim_gstart:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp		/* outermost frame: no parent RBP */
	movq	%r12, %rdi		/* entry(arg) */
	callq	*%r13
	ud2				/* entry never returns */
	.cfi_endproc
	.size	goshim_gstart,.-goshim_gstart


/*
 * Signal-return trampoline for handlers goshim installs with the raw
 * rt_sigaction system call (SA_RESTORER): the handler returns here.
 */
	.text
	.globl	goshim_restore_rt
	.hidden	goshim_restore_rt
	.type	goshim_restore_rt,@function
	.p2align 4
	nop				/* unwinders look at the call site before the label */
goshim_restore_rt:
	movq	$15, %rax		/* rt_sigreturn */
	syscall
	.size	goshim_restore_rt,.-goshim_restore_rt

/*
 * void goshim_sigframe_enter(uintptr_t sp, int sig, void* si, void* uc, fn)
 * Enters fn(sig, si, uc) with %rsp = sp, where a copied signal frame
 * begins with its restorer's address: fn's ret goes to the restorer,
 * whose rt_sigreturn reads the frame above it, as after a kernel delivery.
 */
	.text
	.globl	goshim_sigframe_enter
	.hidden	goshim_sigframe_enter
	.type	goshim_sigframe_enter,@function
	.p2align 4
goshim_sigframe_enter:
	.cfi_startproc
	.cfi_undefined rip
	movq	%rdi, %rsp
	movl	%esi, %edi
	movq	%rdx, %rsi
	movq	%rcx, %rdx
	jmp	*%r8
	.cfi_endproc
	.size	goshim_sigframe_enter,.-goshim_sigframe_enter

/*
 * void goshim_call_on_stack(void* arg, void (*fn)(void*), uintptr_t sp)
 * Calls fn(arg) with the stack pointer at sp (aligned down to 16 bytes),
 * then returns on the caller's stack. The frame record (RBP) keeps the
 * caller's frame reachable for unwinders.
 */
	.text
	.globl	goshim_call_on_stack
	.hidden	goshim_call_on_stack
	.type	goshim_call_on_stack,@function
	.p2align 4
goshim_call_on_stack:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register rbp
	andq	$-16, %rdx
	movq	%rdx, %rsp
	callq	*%rsi
	movq	%rbp, %rsp
	popq	%rbp
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size	goshim_call_on_stack,.-goshim_call_on_stack
	.section .note.GNU-stack,"",@progbits

/*
 * void goshim_jmpbuf_probe(void* buf, uintptr_t* sp)
 * Stores in *sp the stack pointer the C library's _setjmp records for the
 * caller (its value after this call returns), then enters _setjmp(buf) as
 * if the caller had called it: _setjmp returns 0 to the caller.
 * core/jmpbuf.cpp learns from it how glibc mangles a jmp_buf's stack
 * pointer. Nothing ever jumps to buf.
 */
	.text
	.globl	goshim_jmpbuf_probe
	.hidden	goshim_jmpbuf_probe
	.type	goshim_jmpbuf_probe,@function
	.p2align 4
goshim_jmpbuf_probe:
	.cfi_startproc
	leaq	8(%rsp), %rax
	movq	%rax, (%rsi)
	jmp	_setjmp@PLT
	.cfi_endproc
	.size	goshim_jmpbuf_probe,.-goshim_jmpbuf_probe
