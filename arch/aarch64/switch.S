/*
 * goshim context switch, aarch64 (AAPCS64), ELF, GNU as.
 *
 * A switched-out context is a frame on its own stack; the G keeps only its
 * stack pointer (G::sched_sp, offset 0 of struct G). Frame layout (0xb0
 * bytes, 16-aligned):
 *
 *   -------------------------------------------------
 *   | sp+0x00 | FPCR              | sp+0x08 | pad    |
 *   | sp+0x10 | d8   | d9   | sp+0x20 | d10 | d11    |
 *   | sp+0x30 | d12  | d13  | sp+0x40 | d14 | d15    |
 *   | sp+0x50 | x19  | x20  | sp+0x60 | x21 | x22    |
 *   | sp+0x70 | x23  | x24  | sp+0x80 | x25 | x26    |
 *   | sp+0x90 | x27  | x28  | sp+0xa0 | x29 | x30    |
 *   -------------------------------------------------
 *
 * x30 (the link register) is the resume address. The thread pointer
 * (TPIDR_EL0) moves with the stack: `msr tpidr_el0` is an unprivileged
 * write, so there is no fallback path. No pointer authentication, no BTI
 * (Debian's gcc 12 does not enable them by default), SME/ZA off.
 */

#define FRAME_SIZE 0xb0

	.macro SAVE_FRAME
	sub	sp, sp, #FRAME_SIZE
	.cfi_adjust_cfa_offset FRAME_SIZE
	stp	x29, x30, [sp, #0xa0]
	.cfi_rel_offset x29, 0xa0
	.cfi_rel_offset x30, 0xa8
	stp	x27, x28, [sp, #0x90]
	stp	x25, x26, [sp, #0x80]
	stp	x23, x24, [sp, #0x70]
	stp	x21, x22, [sp, #0x60]
	stp	x19, x20, [sp, #0x50]
	stp	d14, d15, [sp, #0x40]
	stp	d12, d13, [sp, #0x30]
	stp	d10, d11, [sp, #0x20]
	stp	d8, d9, [sp, #0x10]
	mrs	x9, fpcr
	str	x9, [sp]
	.endm

	/* Resumes the frame at sp (FPCR written only if it differs). */
	.macro RESTORE_FRAME
	ldr	x9, [sp]
	mrs	x10, fpcr
	cmp	x9, x10
	b.eq	91f
	msr	fpcr, x9
91:	ldp	d8, d9, [sp, #0x10]
	ldp	d10, d11, [sp, #0x20]
	ldp	d12, d13, [sp, #0x30]
	ldp	d14, d15, [sp, #0x40]
	ldp	x19, x20, [sp, #0x50]
	ldp	x21, x22, [sp, #0x60]
	ldp	x23, x24, [sp, #0x70]
	ldp	x25, x26, [sp, #0x80]
	ldp	x27, x28, [sp, #0x90]
	ldp	x29, x30, [sp, #0xa0]
	add	sp, sp, #FRAME_SIZE
	ret
	.endm

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
	.type	goshim_mcall,%function
	.p2align 4
goshim_mcall:
	.cfi_startproc
	SAVE_FRAME
	mov	x9, sp
	str	x9, [x0]		/* gp->sched_sp = sp */
	mov	sp, x2			/* the g0 stack */
	.globl	goshim_mcall_mid
	.hidden	goshim_mcall_mid
goshim_mcall_mid:
	.cfi_undefined x30		/* unwinders stop here on g0 */
	msr	tpidr_el0, x3		/* thread pointer = g0's TLS block */
	.globl	goshim_mcall_mid_end
	.hidden	goshim_mcall_mid_end
goshim_mcall_mid_end:
	blr	x1			/* fn(gp): never returns */
	brk	#0
	.cfi_endproc
	.size	goshim_mcall,.-goshim_mcall

/*
 * void goshim_gogo(uintptr_t sp, uintptr_t tp)
 *
 * Called on g0. Installs the thread pointer tp and resumes the context
 * saved at sp (by goshim_mcall or built by frame_init). Never returns.
 */
	.globl	goshim_gogo
	.hidden	goshim_gogo
	.type	goshim_gogo,%function
	.p2align 4
goshim_gogo:
	.cfi_startproc
	.cfi_undefined x30
	msr	tpidr_el0, x1		/* thread pointer = the G's TLS block */
	mov	sp, x0			/* the G's stack */
	.globl	goshim_gogo_mid_end
	.hidden	goshim_gogo_mid_end
goshim_gogo_mid_end:
	RESTORE_FRAME
	.cfi_endproc
	.size	goshim_gogo,.-goshim_gogo

/*
 * void goshim_switch(G *from, uintptr_t to_sp, uintptr_t to_tp, void (*post)(G *from))
 *
 * Called on a user G: a direct hand-off to another G, without going
 * through g0. Saves from's context into from->sched_sp, switches to the
 * stack and thread pointer of the context saved at to_sp, calls post(from)
 * there (below that saved frame, with the new G's TLS) and, when post
 * returns, resumes that context as goshim_gogo does. post may also not
 * return. When from is resumed later, goshim_switch returns to its caller.
 */
	.globl	goshim_switch
	.hidden	goshim_switch
	.type	goshim_switch,%function
	.p2align 4
goshim_switch:
	.cfi_startproc
	SAVE_FRAME
	mov	x9, sp
	str	x9, [x0]		/* from->sched_sp = sp */
	mov	sp, x1			/* the new G's stack, at its saved frame */
	.globl	goshim_switch_mid
	.hidden	goshim_switch_mid
goshim_switch_mid:
	.cfi_undefined x30
	msr	tpidr_el0, x2		/* thread pointer = the new G's TLS block */
	.globl	goshim_switch_mid_end
	.hidden	goshim_switch_mid_end
goshim_switch_mid_end:
	blr	x3			/* post(from), below the saved frame */
	RESTORE_FRAME			/* then resume the frame at sp */
	.cfi_endproc
	.size	goshim_switch,.-goshim_switch

/*
 * First code a new G runs: frame_init stores entry in x19 and its argument
 * in x20 and makes this the frame's resume address (x30). The undefined
 * x30 marks the outermost frame for every unwinder (libgcc's forced unwind
 * for pthread_exit, libunwind, gdb).
 */
	.globl	goshim_gstart
	.hidden	goshim_gstart
	.type	goshim_gstart,%function
	.p2align 4
goshim_gstart:
	.cfi_startproc
	.cfi_undefined x30
	mov	x29, #0			/* outermost frame: no parent frame record */
	mov	x0, x20			/* entry(arg) */
	blr	x19
	brk	#0			/* entry never returns */
	.cfi_endproc
	.size	goshim_gstart,.-goshim_gstart

/*
 * Signal-return trampoline for handlers goshim installs with the raw
 * rt_sigaction system call (SA_RESTORER): the handler returns here.
 */
	.globl	goshim_restore_rt
	.hidden	goshim_restore_rt
	.type	goshim_restore_rt,%function
	.p2align 4
	nop				/* unwinders look at the call site before the label */
goshim_restore_rt:
	mov	x8, #139		/* rt_sigreturn */
	svc	#0
	.size	goshim_restore_rt,.-goshim_restore_rt


/*
 * void goshim_sigframe_enter_fp(uintptr_t sp, int sig, void* si, void* uc,
 *                               fn, uintptr_t fp)
 * Enters fn(sig, si, uc) as the kernel enters a handler: sp at a copied
 * signal frame, x29 at the frame record above it, x30 at the restorer:
 * fn's ret goes to goshim_restore_rt, whose rt_sigreturn reads the frame
 * at sp, as after a kernel delivery.
 */
	.globl	goshim_sigframe_enter_fp
	.hidden	goshim_sigframe_enter_fp
	.type	goshim_sigframe_enter_fp,%function
	.p2align 4
goshim_sigframe_enter_fp:
	.cfi_startproc
	.cfi_undefined x30
	mov	sp, x0
	mov	x29, x5
	adr	x30, goshim_restore_rt
	mov	x16, x4
	mov	w0, w1
	mov	x1, x2
	mov	x2, x3
	br	x16
	.cfi_endproc
	.size	goshim_sigframe_enter_fp,.-goshim_sigframe_enter_fp


/*
 * void goshim_call_on_stack(void* arg, void (*fn)(void*), uintptr_t sp)
 * Calls fn(arg) with the stack pointer at sp (aligned down to 16 bytes),
 * then returns on the caller's stack (frame record in x29).
 */
	.text
	.globl	goshim_call_on_stack
	.hidden	goshim_call_on_stack
	.type	goshim_call_on_stack,%function
	.p2align 4
goshim_call_on_stack:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov	x29, sp
	.cfi_def_cfa_register x29
	and	x2, x2, #~15
	mov	sp, x2
	blr	x1
	mov	sp, x29
	.cfi_def_cfa_register sp
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
	.size	goshim_call_on_stack,.-goshim_call_on_stack
	.section .note.GNU-stack,"",%progbits

/*
 * void goshim_jmpbuf_probe(void* buf, uintptr_t* sp)
 * Stores in *sp the stack pointer the C library's _setjmp records for the
 * caller (sp is unchanged by bl), then enters _setjmp(buf) as if the
 * caller had called it (x30 is the caller's return address): _setjmp
 * returns 0 to the caller. core/jmpbuf.cpp learns from it how glibc
 * mangles a jmp_buf's stack pointer. Nothing ever jumps to buf.
 */
	.text
	.globl	goshim_jmpbuf_probe
	.hidden	goshim_jmpbuf_probe
	.type	goshim_jmpbuf_probe,%function
	.p2align 4
goshim_jmpbuf_probe:
	.cfi_startproc
	mov	x9, sp
	str	x9, [x1]
	b	_setjmp
	.cfi_endproc
	.size	goshim_jmpbuf_probe,.-goshim_jmpbuf_probe
