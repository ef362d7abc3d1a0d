// SPDX-License-Identifier: GPL-2.0
/*
 * lookaside_marks: tells Lookaside's QEMU system plugin which process and address space the
 * guest is running, by executing *marker loads*.
 *
 * QEMU's plugin API (version 1) cannot read guest registers or memory, so the plugin cannot
 * see CR3 or `current`. It can see every load with its virtual address, and the bytes of
 * every instruction it translates. This module executes one particular load instruction,
 * `movzbl 0x4c4b0000(%rdi),%eax` (bytes 0f b6 87 00 00 4b 4c), whose target lies in a
 * 64 KiB-aligned buffer of its own: the low 16 bits of the address it loads from are a
 * payload. The plugin recognises the instruction by its bytes and decodes the payloads as a
 * stream of 16-bit words. A message is a word `type << 8 | n` followed by n words;
 * integers go low word first. Messages are sent with interrupts off, so they never
 * interleave on a CPU.
 *
 *   CALIB  1  4 words: the guest-physical address of the marker instruction itself (so
 *             the plugin can give instruction fetches their physical addresses)
 *   START  2  task: recording starts (`1` written to the module's parameter `recording`)
 *   SWITCH 3  task: the scheduler switches to this task (tracepoint sched_switch)
 *   EXEC   4  task: the current task has exec'd a new program (sched_process_exec)
 *   RENAME 5  task: the task's name changed (task_rename)
 *   STOP   6  no words: recording ends (`0` written to `recording`, or the module removed)
 *   TEXT   7  8 words: the start and the end of this module's code (sent before START): the
 *             plugin records nothing that code does, the tracing's own work (the probes,
 *             the marker loads), and counts it apart
 *   LAYOUT 8  56 words: the kernel's address layout (sent before START), read here from the
 *             running kernel: the start and end (exclusive) of its direct map, its image
 *             (text), modules, vmalloc space, vmemmap, fixmap and CPU entry area, in that
 *             order, 4 words each (see lk_layout)
 *   PHASE  9  2 words: the workload starts a phase (`LABEL` written to the module's
 *             parameter `phase`, 1-4 printable ASCII bytes, first byte in the low half of
 *             the first word): the plugin records a phase marker there
 *   SHOOT 10  17 words: a TLB shootdown this CPU sends: the address-space id of the mm whose
 *             translations go (4 words; 0: the kernel's own), the start and end of the
 *             range (4 words each; end all ones: every translation), the page shift of its
 *             stride (1 word) and the mask of the CPUs that drop them (4 words, bit c for
 *             CPU c, this one included when it flushes too)
 *
 * Recording spans the workload alone: /init loads the module (registering the probes
 * patches the kernel's code), starts recording, runs the workload, stops recording and
 * removes the module, so that neither insmod nor rmmod is in the trace. The probes copy
 * names with their own loop rather than the kernel's strncpy, so that all of their work
 * runs in the module's code.
 *
 * A task is 14 words: pid (2 words), the address-space id of its mm (4 words:
 * mm->context.ctx_id, unique for the life of the kernel, unlike the page-table root, whose
 * pages are reused; 0 for a kernel thread, which has no mm of its own) and its name (16
 * bytes, 8 words).
 *
 * The probes hang on the kernel's tracepoints, found by name with
 * for_each_kernel_tracepoint() (the __tracepoint_* symbols are not exported to modules).
 * TLB flushes have no tracepoint that names the range and the CPUs: three kprobes send
 * SHOOT, at the entry of native_flush_tlb_multi() (a user address space's range, to the
 * CPUs of its mm that are not lazy, or all of them when page tables were freed: the
 * kernel's own rule), of flush_tlb_mm_range() when the range stays on this CPU (no other
 * runs the mm: the flush after a fork, munmap, mprotect or exec of a process that runs on
 * one CPU, and every one with a single CPU) and of flush_tlb_kernel_range() (the kernel's,
 * to every online CPU). They are built in with -DLK_TLB_FLUSHES, which every capture uses
 * now; without it the module is the one that made the traces stored before (a recapture of
 * one of those builds it so). A kprobe costs a few kernel instructions outside this module
 * (its entry through ftrace), which stay in the trace, once per flush.
 */
#include <linux/highmem.h>
#include <linux/gfp.h>
#include <linux/irqflags.h>
#ifdef LK_TLB_FLUSHES
#include <linux/kprobes.h>
#endif
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/moduleparam.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <asm/cpu_entry_area.h>
#include <asm/fixmap.h>
#include <asm/pgtable.h>

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Marker loads for Lookaside's full-system capture");

#define LK_DISP 0x4c4b0000UL
#define LK_ORDER 4 /* 16 pages: 64 KiB, naturally aligned */

enum { CALIB = 1, START = 2, SWITCH = 3, EXEC = 4, RENAME = 5, STOP = 6, TEXT = 7, LAYOUT = 8,
       PHASE = 9, SHOOT = 10 };
#define TASK_WORDS 14

static unsigned long lk_buf;

/* The marker load. One copy only (noinline), so that its address is known. */
extern char lk_mark_insn[];
static noinline void lk_mark(u16 w)
{
	unsigned long p = lk_buf + w - LK_DISP;
	u32 out;

	asm volatile(".globl lk_mark_insn\n"
		     "lk_mark_insn: movzbl 0x4c4b0000(%%rdi), %%eax"
		     : "=a"(out)
		     : "D"(p)
		     : "memory");
}

static void lk_words(u64 v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		lk_mark((u16)(v >> (16 * i)));
}

/* Sends a task message: pid, address-space id, name. Interrupts off, so that no other
 * message (a context switch) lands inside it. */
static void lk_send(int type, struct task_struct *t, const char *comm)
{
	char name[TASK_COMM_LEN];
	unsigned long flags;
	int i;

	for (i = 0; i < TASK_COMM_LEN - 1 && comm[i]; i++)
		name[i] = comm[i];
	for (; i < TASK_COMM_LEN; i++)
		name[i] = 0;
	local_irq_save(flags);
	lk_mark(type << 8 | TASK_WORDS);
	lk_words((u32)t->pid, 2);
	lk_words(t->mm ? t->mm->context.ctx_id : 0, 4);
	for (i = 0; i < TASK_COMM_LEN; i += 2)
		lk_mark((u8)name[i] | (u16)(u8)name[i + 1] << 8);
	local_irq_restore(flags);
}

static void probe_switch(void *data, bool preempt, struct task_struct *prev,
			 struct task_struct *next, unsigned int prev_state)
{
	lk_send(SWITCH, next, next->comm);
}

static void probe_exec(void *data, struct task_struct *p, pid_t old_pid,
		       struct linux_binprm *bprm)
{
	lk_send(EXEC, p, p->comm);
}

/* Called before the name changes: sends the new one. */
static void probe_rename(void *data, struct task_struct *task, const char *comm)
{
	lk_send(RENAME, task, comm);
}

static bool lk_recording;

/* The bounds of this module's code: what the plugin leaves out of the trace. */
static void lk_text(void)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
	unsigned long lo = (unsigned long)THIS_MODULE->mem[MOD_TEXT].base;
	unsigned long hi = lo + THIS_MODULE->mem[MOD_TEXT].size;
#else
	unsigned long lo = (unsigned long)THIS_MODULE->core_layout.base;
	unsigned long hi = lo + THIS_MODULE->core_layout.text_size;
#endif
	unsigned long flags;

	local_irq_save(flags);
	lk_mark(TEXT << 8 | 8);
	lk_words(lo, 4);
	lk_words(hi, 4);
	local_irq_restore(flags);
}

/* The kernel's address layout, as this kernel computed it at boot (page_offset_base,
 * vmalloc_base and vmemmap_base move under KASLR; the rest are this build's constants):
 * what a model of a machine whose kernel runs partly unmapped (MIPS kseg0) needs to know
 * which references are to the direct map of physical memory and which to the kernel's
 * image. Each class is the whole window the kernel reserves for it. */
static void lk_layout(void)
{
	u64 r[14] = {
		PAGE_OFFSET, PAGE_OFFSET + (1ULL << MAX_PHYSMEM_BITS),
		__START_KERNEL_map, __START_KERNEL_map + KERNEL_IMAGE_SIZE,
		MODULES_VADDR, MODULES_END,
		VMALLOC_START, VMALLOC_END + 1,
		VMEMMAP_START,
		VMEMMAP_START + (1ULL << (MAX_PHYSMEM_BITS - PAGE_SHIFT)) * sizeof(struct page),
		FIXADDR_START, FIXADDR_TOP + PAGE_SIZE,
		CPU_ENTRY_AREA_BASE, CPU_ENTRY_AREA_BASE + CPU_ENTRY_AREA_MAP_SIZE,
	};
	unsigned long flags;
	int i;

	local_irq_save(flags);
	lk_mark(LAYOUT << 8 | 56);
	for (i = 0; i < 14; i++)
		lk_words(r[i], 4);
	local_irq_restore(flags);
}

static void lk_stop(void)
{
	unsigned long flags;

	local_irq_save(flags);
	lk_mark(STOP << 8);
	local_irq_restore(flags);
}

/* `echo 1 > /sys/module/lookaside_marks/parameters/recording` starts recording, with the
 * writing task as the one running; `echo 0` stops it. */
static int lk_set_recording(const char *val, const struct kernel_param *kp)
{
	bool on;
	int err = kstrtobool(val, &on);

	if (err)
		return err;
	if (on && !lk_recording) {
		lk_recording = true;
		lk_layout();
		lk_text();
		lk_send(START, current, current->comm);
	} else if (!on && lk_recording) {
		lk_recording = false;
		lk_stop();
	}
	return 0;
}

static const struct kernel_param_ops lk_recording_ops = {
	.set = lk_set_recording,
	.get = param_get_bool,
};
module_param_cb(recording, &lk_recording_ops, &lk_recording, 0600);
MODULE_PARM_DESC(recording, "1: record from now on (Lookaside's plugin); 0: stop");

/* `echo run > /sys/module/lookaside_marks/parameters/phase` marks the start of the phase
 * `run` of the workload (while recording): a workload says which part of it is measured
 * (its set-up apart), and the trace carries the mark. */
static int lk_set_phase(const char *val, const struct kernel_param *kp)
{
	u8 label[4] = { 0 };
	unsigned long flags;
	size_t n;

	/* Its own loop, as the probes' (all of its work in the module's code). */
	for (n = 0; val[n] && val[n] != '\n'; n++) {
		if (n == sizeof label || val[n] < 0x21 || val[n] > 0x7e)
			return -EINVAL;
		label[n] = val[n];
	}
	if (n == 0)
		return -EINVAL;
	if (!lk_recording)
		return 0;
	local_irq_save(flags);
	lk_mark(PHASE << 8 | 2);
	lk_mark(label[0] | (u16)label[1] << 8);
	lk_mark(label[2] | (u16)label[3] << 8);
	local_irq_restore(flags);
	return 0;
}

static const struct kernel_param_ops lk_phase_ops = {
	.set = lk_set_phase,
};
module_param_cb(phase, &lk_phase_ops, NULL, 0200);
MODULE_PARM_DESC(phase, "LABEL (1-4 ASCII bytes): the workload starts phase LABEL");

#ifdef LK_TLB_FLUSHES
/* What the probes read of the kernel's TLB-flush state. asm/tlbflush.h hides both from
 * modules (#ifndef MODULE), so their leading fields are declared here as Linux 5.13 to 6.x
 * lay them out (arch/x86/include/asm/tlbflush.h); the kernel is pinned with the module. */
struct lk_flush_tlb_info {
	struct mm_struct *mm;
	unsigned long start;
	unsigned long end;
	u64 new_tlb_gen;
	unsigned int initiating_cpu;
	u8 stride_shift;
	u8 freed_tables;
};

struct lk_tlb_state_shared {
	bool is_lazy;
};

DECLARE_PER_CPU_SHARED_ALIGNED(struct lk_tlb_state_shared, cpu_tlbstate_shared);

/* Sends a shootdown of [start, end) of the address space `ctx` to the CPUs in `mask` for
 * which `reached` is true. */
static void lk_shoot(u64 ctx, u64 start, u64 end, unsigned int shift,
		     const struct cpumask *mask, bool (*reached)(int cpu, bool all), bool all)
{
	unsigned long flags;
	u64 targets = 0;
	int cpu;

	for_each_cpu(cpu, mask)
		if (cpu < 64 && reached(cpu, all))
			targets |= 1ULL << cpu;
	local_irq_save(flags);
	lk_mark(SHOOT << 8 | 17);
	lk_words(ctx, 4);
	lk_words(start, 4);
	lk_words(end, 4);
	lk_mark(shift);
	lk_words(targets, 4);
	local_irq_restore(flags);
}

/* native_flush_tlb_multi()'s rule: a lazy CPU (a kernel thread borrowing the mm) is left
 * alone unless page tables were freed. */
static bool lk_not_lazy(int cpu, bool freed_tables)
{
	return freed_tables || !per_cpu(cpu_tlbstate_shared.is_lazy, cpu);
}

static bool lk_every(int cpu, bool all)
{
	return true;
}

/* native_flush_tlb_multi(const struct cpumask *cpumask, const struct flush_tlb_info *info) */
static int lk_flush_multi(struct kprobe *p, struct pt_regs *regs)
{
	const struct lk_flush_tlb_info *info = (const struct lk_flush_tlb_info *)regs->si;

	if (!lk_recording || !info)
		return 0;
	lk_shoot(info->mm ? info->mm->context.ctx_id : 0, info->start, info->end,
		 info->stride_shift, (const struct cpumask *)regs->di, lk_not_lazy,
		 info->freed_tables);
	return 0;
}

/* flush_tlb_kernel_range(unsigned long start, unsigned long end): on every online CPU. */
static int lk_flush_kernel(struct kprobe *p, struct pt_regs *regs)
{
	if (!lk_recording)
		return 0;
	lk_shoot(0, regs->di, regs->si, PAGE_SHIFT, cpu_online_mask, lk_every, true);
	return 0;
}

static struct kprobe lk_kprobe_multi = {
	.symbol_name = "native_flush_tlb_multi", .pre_handler = lk_flush_multi,
};
static struct kprobe lk_kprobe_kernel = {
	.symbol_name = "flush_tlb_kernel_range", .pre_handler = lk_flush_kernel,
};
/* flush_tlb_mm_range(mm, start, end, stride_shift, freed_tables): a range that stays on
 * this CPU, as the kernel decides (no other CPU in the mm's mask; native_flush_tlb_multi()
 * reports the others). */
static int lk_flush_range(struct kprobe *p, struct pt_regs *regs)
{
	struct mm_struct *mm = (struct mm_struct *)regs->di;
	int cpu = raw_smp_processor_id();

	if (!lk_recording || !mm || cpumask_any_but(mm_cpumask(mm), cpu) < nr_cpu_ids)
		return 0;
	lk_shoot(mm->context.ctx_id, regs->si, regs->dx, regs->cx & 0xff, cpumask_of(cpu),
		 lk_every, true);
	return 0;
}

static struct kprobe lk_kprobe_range = {
	.symbol_name = "flush_tlb_mm_range", .pre_handler = lk_flush_range,
};
static struct kprobe *kprobes[] = { &lk_kprobe_multi, &lk_kprobe_kernel, &lk_kprobe_range };
#endif

struct lk_probe {
	const char *name;
	void *fn;
	struct tracepoint *tp;
};

static struct lk_probe probes[] = {
	{ "sched_switch", probe_switch, NULL },
	{ "sched_process_exec", probe_exec, NULL },
	{ "task_rename", probe_rename, NULL },
};

static void lk_find(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(probes); i++)
		if (!strcmp(tp->name, probes[i].name))
			probes[i].tp = tp;
}

static int __init lk_init(void)
{
	unsigned long flags, insn = (unsigned long)lk_mark_insn;
	phys_addr_t pa;
	int i, err;

	lk_buf = __get_free_pages(GFP_KERNEL | __GFP_ZERO, LK_ORDER);
	if (!lk_buf)
		return -ENOMEM;
	for_each_kernel_tracepoint(lk_find, NULL);
	for (i = 0; i < ARRAY_SIZE(probes); i++) {
		if (!probes[i].tp) {
			pr_err("lookaside_marks: no tracepoint %s\n", probes[i].name);
			free_pages(lk_buf, LK_ORDER);
			return -ENOENT;
		}
	}
	pa = ((phys_addr_t)vmalloc_to_pfn((void *)insn) << PAGE_SHIFT) + offset_in_page(insn);
	local_irq_save(flags);
	lk_mark(CALIB << 8 | 4);
	lk_words(pa, 4);
	local_irq_restore(flags);
#ifdef LK_TLB_FLUSHES
	err = register_kprobes(kprobes, ARRAY_SIZE(kprobes));
	if (err) {
		pr_err("lookaside_marks: cannot probe the TLB flushes (%d)\n", err);
		free_pages(lk_buf, LK_ORDER);
		return err;
	}
#endif
	for (i = 0; i < ARRAY_SIZE(probes); i++) {
		err = tracepoint_probe_register(probes[i].tp, probes[i].fn, NULL);
		if (err) {
			for (i--; i >= 0; i--)
				tracepoint_probe_unregister(probes[i].tp, probes[i].fn, NULL);
#ifdef LK_TLB_FLUSHES
			unregister_kprobes(kprobes, ARRAY_SIZE(kprobes));
#endif
			free_pages(lk_buf, LK_ORDER);
			return err;
		}
	}
	return 0;
}

static void __exit lk_exit(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(probes); i++)
		tracepoint_probe_unregister(probes[i].tp, probes[i].fn, NULL);
#ifdef LK_TLB_FLUSHES
	unregister_kprobes(kprobes, ARRAY_SIZE(kprobes));
#endif
	tracepoint_synchronize_unregister();
	if (lk_recording) {
		lk_recording = false;
		lk_stop();
	}
	free_pages(lk_buf, LK_ORDER);
}

module_init(lk_init);
module_exit(lk_exit);
