/*
 * Lookaside's QEMU TCG plugin for whole systems (qemu-system-x86_64, plugin API version 1):
 * records every instruction the guest executes (a fetch of its bytes) and every load and
 * store, kernel and user, with its virtual and physical address, its mode and the address
 * space it ran in, as a raw stream that `lookaside trace --system` turns into a native trace.
 *
 * Arguments (-plugin lookaside-system-plugin.so,ARG,...):
 *   fd=N | out=PATH   where the stream goes (see lookaside-stream.h)
 *   ram=BYTES         the guest's RAM size (-m): instruction fetches get physical addresses
 *                     inside it
 *
 * The guest tells the plugin what it runs through *marker loads* executed by the
 * lookaside_marks kernel module (../system/lookaside_marks.c documents the protocol): the
 * plugin recognises the marker instruction by its bytes when it translates it and decodes
 * the low 16 bits of each address it loads from as a word of a message. Nothing is recorded
 * before the module's START message (the boot, loading the module) nor after its STOP
 * message (removing it), which ends the stream with its EXCLUDED and END blocks; a guest that stops without STOP leaves the stream without one
 * (an incomplete capture, which the reader rejects). Until START only the marker
 * instruction is instrumented, so that the boot runs at nearly QEMU's own speed; START
 * resets the plugin (qemu_plugin_reset flushes every translation) and instruments
 * everything from then on.
 *
 * - Mode: kernel if the instruction's address or the accessed address is in the upper half
 *   (accesses QEMU makes while delivering an interrupt from user mode carry the user PC).
 * - Address space: the module's mm->context.ctx_id, numbered densely from 1 in order of
 *   appearance. The scheduler's SWITCH message names the next task's address space, which
 *   takes effect at the next executed `mov %reg,%cr3` (the hardware switch; a kernel thread
 *   borrows the previous one and writes no CR3, and a task of the address space already
 *   running needs no switch, so neither leaves one pending); EXEC takes effect at once (exec
 *   loads its new CR3 before the tracepoint fires, with only kernel code in between). A CR3
 *   write no message announced loads an address space the module does not name (text_poke's
 *   temporary mm, kthread_use_mm, init_mm when a lazy kernel thread lets go, exec's new mm
 *   until EXEC): it is address space 0, and the next unannounced CR3 write returns to the
 *   one before (unuse_temporary_mm, kthread_unuse_mm). A CR3 *reload* (`mov %cr3,%reg`
 *   then, right after it in memory, `mov %reg,%cr3` of the same register:
 *   native_flush_tlb_local's flush of the TLB) keeps the address space. It is told at run
 *   time, by the last CR3 read the vCPU executed: the two instructions need not be in one
 *   translated block (under -icount a CR3 read ends its block). With several CPUs, a CR3
 *   write after the scheduler switched to a task of the address space already loaded (the
 *   CPU was lazy, skipped a shootdown, and flushes now) keeps the address space too, and is
 *   that flush: a FLUSH_SPACE record of this CPU (with one CPU no shootdown is skipped, and
 *   such a write is exec's, into its new address space). Each CR3 write, reloads included,
 *   is a CONTEXT_SWITCH record.
 * - Physical addresses: loads and stores from QEMU (qemu_plugin_hwaddr_phys_addr);
 *   instruction fetches from the host address of their bytes, less the host address of
 *   guest-physical 0, which the module's CALIB message gives (the physical address of the
 *   marker instruction, whose host address the plugin saw).
 * - PROC blocks name each (address space, pid, name) when first seen.
 * - Markers (kind 8, the payload in place of the address): the idle loop's bounds, where the
 *   scheduler switches to the idle task (pid 0) and away from it; and each phase the
 *   workload starts (the module's PHASE message).
 * - The LAYOUT block, at START, gives the kernel's address layout from the module's LAYOUT
 *   message (its direct map, image, modules, vmalloc, vmemmap, fixmap, CPU entry area).
 * - The tracing's own work is left out: every instruction in the module's code (its TEXT
 *   message gives the bounds), with its loads and stores, is counted by kind instead of
 *   recorded, and the EXCLUDED block before END gives the counts. What stays is the kernel's
 *   side of each probe call: the call through the tracepoint's static call (a few
 *   instructions).
 *
 * - Shootdowns (kind 4, a TLB flush): the module's SHOOT message, sent where the kernel asks
 *   other CPUs to drop translations (an IPI to each), gives the address space, the range
 *   and the CPUs it reaches; each page of the range is a flush record (or one record of
 *   every page, all ones, above the kernel's own ceiling), whose physical address is the
 *   mask of those CPUs.
 * - Several vCPUs (-smp N): each keeps its own state (address space, messages), and their
 *   records go out in the order they ran, as blocks of one vCPU each. That needs the vCPUs
 *   to run one at a time, in turn, on one thread (-accel tcg,thread=single, which -icount
 *   implies); then the order is the one QEMU ran them in.
 *
 * Records are 24 bytes {u64 vaddr, u64 paddr (all ones: unknown), u32 address space, u16
 * size, u8 kind (0 fetch, 1 load, 2 store, 3 context switch, 4 TLB flush, 8 marker), u8
 * mode (0 user, 1 kernel)}, in execution order. The marker loads themselves are not
 * recorded.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "lookaside-stream.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum {
    KIND_FETCH = 0, KIND_LOAD = 1, KIND_STORE = 2, KIND_SWITCH = 3, KIND_FLUSH = 4,
    KIND_MARKER = 8
};
enum { CR3_WRITE = 1, CR3_READ = 2 };
enum {
    MSG_CALIB = 1, MSG_START, MSG_SWITCH, MSG_EXEC, MSG_RENAME, MSG_STOP, MSG_TEXT, MSG_LAYOUT,
    MSG_PHASE, MSG_SHOOT
};
/* Marker payloads (crates/lookaside/src/event.rs): a phase the workload starts (its label's
 * bytes, first byte highest, in the low 32 bits), the idle loop's bounds (1 opens, 0 closes). */
#define PHASE_MARK 0x5048415300000000ULL
#define IDLE_MARK 0x49444c4500000000ULL
/* A TLB flush of every page (a flush record's address), and of every page of the record's
 * address space but the global ones (a process's whole range). */
#define FLUSH_ALL UINT64_MAX
#define FLUSH_SPACE (UINT64_MAX - 1)
/* Most pages a shootdown flushes one by one: the kernel's tlb_single_page_flush_ceiling
 * (a larger range it flushes whole). */
#define FLUSH_CEILING 33
/* Kernel address classes in a LAYOUT message and block: a start and an end each. */
#define LAYOUT_CLASSES 7

#define BUF_RECS 4096u
#define MAX_VCPUS 64u
#define NO_PADDR UINT64_MAX
#define TASK_WORDS 14
/* movzbl 0x4c4b0000(%rdi),%eax */
static const uint8_t MARKER[7] = {0x0f, 0xb6, 0x87, 0x00, 0x00, 0x4b, 0x4c};

struct rec {
    uint64_t vaddr;
    uint64_t paddr;
    uint32_t asid;
    uint16_t size;
    uint8_t kind;
    uint8_t mode;
};

/* One instruction as translated: kept for as long as the plugin runs, shared by every
 * translation of the same bytes at the same address (see insn_for). */
struct insn {
    uint64_t vaddr;
    uint64_t haddr;
    uint16_t size;
    uint8_t kernel;
    uint8_t cr3;     /* moves CR3: CR3_WRITE or CR3_READ (0: neither) */
    uint8_t cr3_reg; /* the general register it moves CR3 from or to */
    uint8_t tracing; /* in the module's code: counted, not recorded */
};

/* A message being received from the module. */
struct msg {
    uint16_t words[64];
    int type, need, have;
};

#define SAVED 16

struct vcpu {
    uint32_t asid;    /* address space running */
    uint32_t pending; /* takes effect at the next CR3 write (0: none) */
    /* The scheduler switched to a task of the address space already loaded (a thread of it,
     * or after a kernel thread that borrowed it): a CR3 write before the next switch is
     * the kernel's deferred flush of that address space, not a switch. */
    int same_switch;
    int idle;         /* the idle task runs (pid 0) */
    /* The last CR3 read executed: where the instruction after it starts, and the register
     * it read into (a CR3 write there from that register reloads CR3). */
    uint64_t cr3_read_end;
    uint8_t cr3_read_reg;
    /* Address spaces left for an unnamed one (address space 0), most recent last. */
    uint32_t saved[SAVED];
    uint32_t n_saved;
    uint64_t marker_haddr;
    uint64_t excluded[3]; /* references of the module's code, by kind */
    struct msg msg;
};

static struct vcpu *vcpus[MAX_VCPUS];
/* The guest has several CPUs: a CPU can be lazy while another shoots its address space
 * down (see struct vcpu's same_switch). With one it cannot, and its CR3 writes are read as
 * they always were. */
static int several_cpus;
static unsigned n_vcpus;
/* The records not yet written, all of vCPU `recs_vcpu`, in the order they were made. The
 * vCPUs run one at a time, in turn (single-threaded TCG), so one buffer keeps their order
 * across vCPUs: a record of another vCPU writes out the buffer
 * first, and the blocks' order is the execution order. */
static struct rec recs[BUF_RECS];
static unsigned n_recs, recs_vcpu;
static qemu_plugin_id_t plugin_id;
static int recording, stopped;
static uint64_t ram_bytes;
/* Host address of guest-physical 0; valid once calibrated. */
static uint64_t ram_host;
static int calibrated;
/* The module's code, [text_lo, text_hi): known from its TEXT message, before START. */
static uint64_t text_lo, text_hi;
/* The kernel's address layout, from the LAYOUT message before START; written as the
 * LAYOUT block with the first records. */
static uint64_t layout[2 * LAYOUT_CLASSES];
static int have_layout;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static inline int upper(uint64_t a)
{
    return (int)(a >> 63);
}

/* --- instructions, de-duplicated so that retranslation costs no memory -------------- */

static struct insn **itab;
static size_t icap, icount;

static size_t ihash(uint64_t vaddr, uint64_t haddr)
{
    uint64_t h = vaddr * 0x9e3779b97f4a7c15ull ^ haddr * 0xc2b2ae3d27d4eb4full;
    return (size_t)(h ^ h >> 29);
}

/* The one struct insn for these values; called at translation time. */
static struct insn *insn_for(uint64_t vaddr, uint64_t haddr, uint16_t size, int cr3,
                             int cr3_reg, int tracing)
{
    pthread_mutex_lock(&table_lock);
    if (2 * (icount + 1) > icap) {
        size_t ncap = icap ? 2 * icap : 1u << 16;
        struct insn **n = calloc(ncap, sizeof *n);
        if (!n) {
            say("out of memory");
            abort();
        }
        for (size_t i = 0; i < icap; i++) {
            struct insn *p = itab[i];
            if (!p)
                continue;
            size_t j = ihash(p->vaddr, p->haddr) & (ncap - 1);
            while (n[j])
                j = (j + 1) & (ncap - 1);
            n[j] = p;
        }
        free(itab);
        itab = n;
        icap = ncap;
    }
    size_t j = ihash(vaddr, haddr) & (icap - 1);
    struct insn *p;
    while ((p = itab[j])) {
        if (p->vaddr == vaddr && p->haddr == haddr && p->size == size && p->cr3 == cr3 &&
            p->cr3_reg == cr3_reg && p->tracing == tracing)
            break;
        j = (j + 1) & (icap - 1);
    }
    if (!p) {
        p = malloc(sizeof *p);
        if (!p) {
            say("out of memory");
            abort();
        }
        *p = (struct insn){vaddr,        haddr,           size,
                           (uint8_t)upper(vaddr), (uint8_t)cr3, (uint8_t)cr3_reg,
                           (uint8_t)tracing};
        itab[j] = p;
        icount++;
    }
    pthread_mutex_unlock(&table_lock);
    return p;
}

/* --- address spaces and processes ----------------------------------------------------- */

static uint64_t *ctx_ids; /* ctx_ids[asid - 1] */
static uint32_t n_asids, cap_asids;

/* The address space numbered for this mm->context.ctx_id (0 for none). */
static uint32_t asid_for(uint64_t ctx)
{
    if (ctx == 0)
        return 0;
    for (uint32_t i = n_asids; i > 0; i--)
        if (ctx_ids[i - 1] == ctx)
            return i;
    if (n_asids == cap_asids) {
        cap_asids = cap_asids ? 2 * cap_asids : 256;
        ctx_ids = realloc(ctx_ids, cap_asids * sizeof *ctx_ids);
        if (!ctx_ids) {
            say("out of memory");
            abort();
        }
    }
    ctx_ids[n_asids++] = ctx;
    return n_asids;
}

struct proc {
    uint32_t pid, asid;
    char name[16];
};

static struct proc *procs;
static size_t n_procs, cap_procs;

/* Writes a PROC block the first time this (pid, address space, name) is seen. Called with
 * out_lock held. */
static void note_proc(uint32_t pid, uint32_t asid, const char name[16])
{
    for (size_t i = n_procs; i > 0; i--) {
        struct proc *p = &procs[i - 1];
        if (p->pid == pid && p->asid == asid && memcmp(p->name, name, 16) == 0)
            return;
    }
    if (n_procs == cap_procs) {
        cap_procs = cap_procs ? 2 * cap_procs : 256;
        procs = realloc(procs, cap_procs * sizeof *procs);
        if (!procs) {
            say("out of memory");
            abort();
        }
    }
    struct proc *p = &procs[n_procs++];
    p->pid = pid;
    p->asid = asid;
    memcpy(p->name, name, 16);
    put_block(TAG_PROC, asid, pid, name, 16);
}

/* --- records ------------------------------------------------------------------------- */

/* Writes the records not yet written as one block of their vCPU. */
static void flush(void)
{
    pthread_mutex_lock(&out_lock);
    if (n_recs && !closed) {
        put_block(TAG_RECORDS, recs_vcpu, n_recs, recs, (size_t)n_recs * sizeof(struct rec));
        if (!closed)
            written += n_recs;
    }
    n_recs = 0;
    pthread_mutex_unlock(&out_lock);
}

/* A record of vCPU `index` in address space `asid`. */
static inline void put_in(unsigned index, uint32_t asid, uint64_t vaddr, uint64_t paddr,
                          uint16_t size, uint8_t kind, uint8_t mode)
{
    if (index != recs_vcpu) {
        flush();
        recs_vcpu = index;
    }
    struct rec *r = &recs[n_recs];
    r->vaddr = vaddr;
    r->paddr = paddr;
    r->asid = asid;
    r->size = size;
    r->kind = kind;
    r->mode = mode;
    if (++n_recs == BUF_RECS)
        flush();
}

/* A record of vCPU `index` in the address space it runs. */
static inline void put(unsigned index, uint64_t vaddr, uint64_t paddr, uint16_t size,
                       uint8_t kind, uint8_t mode)
{
    put_in(index, vcpus[index]->asid, vaddr, paddr, size, kind, mode);
}

static inline uint64_t fetch_paddr(const struct insn *i)
{
    uint64_t off = i->haddr - ram_host;
    return calibrated && off < ram_bytes ? off : NO_PADDR;
}

static void on_fetch(unsigned int vcpu, void *udata)
{
    const struct insn *i = udata;
    if (recording)
        put(vcpu, i->vaddr, fetch_paddr(i), i->size, KIND_FETCH, i->kernel);
}

/* The module's own code: counted, not recorded. */
static void on_tracing_fetch(unsigned int vcpu, void *udata)
{
    (void)udata;
    if (recording)
        vcpus[vcpu]->excluded[KIND_FETCH]++;
}

static void on_tracing_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
                           void *udata)
{
    (void)vaddr, (void)udata;
    if (recording)
        vcpus[vcpu]->excluded[qemu_plugin_mem_is_store(info) ? KIND_STORE : KIND_LOAD]++;
}

/* A CR3 read is about to execute: a CR3 write right after it from the same register
 * reloads CR3. */
static void on_cr3_read(unsigned int vcpu, void *udata)
{
    const struct insn *i = udata;
    on_fetch(vcpu, udata);
    struct vcpu *v = vcpus[vcpu];
    v->cr3_read_end = i->vaddr + i->size;
    v->cr3_read_reg = i->cr3_reg;
}

/* A CR3 write is about to execute: the address space the scheduler chose takes effect. */
static void on_cr3(unsigned int vcpu, void *udata)
{
    const struct insn *i = udata;
    on_fetch(vcpu, udata);
    struct vcpu *v = vcpus[vcpu];
    int reload = v->cr3_read_end == i->vaddr && v->cr3_read_reg == i->cr3_reg;
    v->cr3_read_end = 0;
    int same = v->same_switch;
    v->same_switch = 0;
    if (v->pending) {
        v->asid = v->pending;
        v->pending = 0;
        v->n_saved = 0;
    } else if (reload) {
        /* The loaded address space again: a TLB flush, no switch. */
    } else if (same && v->asid != 0) {
        /* switch_mm_irqs_off() of an address space to itself writes CR3 only to flush it:
         * this CPU was lazy (a kernel thread borrowed the mm) while another CPU changed the
         * mappings, skipped that shootdown and flushes now. Its TLB flush, of that address
         * space on this CPU, before the CR3 write's switch record. */
        if (recording)
            put(vcpu, FLUSH_SPACE, 1ULL << (vcpu & 63), 0, KIND_FLUSH, 1);
    } else if (v->asid != 0) {
        /* Unannounced: into an address space the module does not name. */
        if (v->n_saved == SAVED) {
            memmove(v->saved, v->saved + 1, (SAVED - 1) * sizeof v->saved[0]);
            v->n_saved--;
        }
        v->saved[v->n_saved++] = v->asid;
        v->asid = 0;
    } else if (v->n_saved > 0) {
        /* Unannounced, from an unnamed one: back to where it was left. */
        v->asid = v->saved[--v->n_saved];
    }
    if (recording)
        put(vcpu, 0, NO_PADDR, 0, KIND_SWITCH, 1);
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    const struct insn *i = udata;
    if (!recording)
        return;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    uint64_t paddr = hw ? qemu_plugin_hwaddr_phys_addr(hw) : NO_PADDR;
    put(vcpu, vaddr, paddr, (uint16_t)(1u << qemu_plugin_mem_size_shift(info)),
        qemu_plugin_mem_is_store(info) ? KIND_STORE : KIND_LOAD, i->kernel | upper(vaddr));
}

/* --- messages from the guest --------------------------------------------------------- */

static uint64_t words_u64(const uint16_t *w, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)w[i] << (16 * i);
    return v;
}

static void end_stream(void)
{
    /* {module code start, end, fetches, loads, stores} */
    uint64_t excluded[5] = {text_lo, text_hi, 0, 0, 0};
    flush();
    for (unsigned k = 0; k < n_vcpus; k++)
        if (vcpus[k])
            for (int kind = 0; kind < 3; kind++)
                excluded[2 + kind] += vcpus[k]->excluded[kind];
    pthread_mutex_lock(&out_lock);
    if (!closed) {
        put_block(TAG_EXCLUDED, 0, 0, excluded, sizeof excluded);
        put_block(TAG_END, n_vcpus, written, NULL, 0);
        closed = 1;
    }
    close(out_fd);
    pthread_mutex_unlock(&out_lock);
}

/* A SHOOT message: the kernel on vCPU `index` asks the CPUs of a mask to drop the
 * translations of a range of an address space (ctx_id 0: the kernel's), or all of them (end
 * all ones). One flush record per page, or for a range above the kernel's ceiling one of the
 * whole address space (FLUSH_SPACE: a process's, whose global kernel entries and other
 * processes' stay) or of every page (FLUSH_ALL: the kernel's range, which the kernel flushes
 * whole); each record's physical address is the mask of the CPUs it reaches. */
static void put_shootdown(unsigned index, const uint16_t *w)
{
    uint32_t asid = asid_for(words_u64(w, 4));
    uint64_t start = words_u64(w + 4, 4), end = words_u64(w + 8, 4);
    unsigned shift = w[12] & 0xff;
    uint64_t targets = words_u64(w + 13, 4);
    if (shift < 12 || shift > 30)
        shift = 12;
    uint64_t first = start >> shift, last = (end - 1) >> shift;
    if (end == FLUSH_ALL || end <= start || last - first >= FLUSH_CEILING) {
        put_in(index, asid, words_u64(w, 4) ? FLUSH_SPACE : FLUSH_ALL, targets, 0, KIND_FLUSH, 1);
        return;
    }
    for (uint64_t page = first; page <= last; page++)
        put_in(index, asid, page << shift, targets, 0, KIND_FLUSH, 1);
}

static void on_reset(qemu_plugin_id_t id);

/* A whole message has arrived on vCPU `index`. */
static void on_message(unsigned index, struct vcpu *v)
{
    const uint16_t *w = v->msg.words;
    switch (v->msg.type) {
    case MSG_CALIB:
        ram_host = v->marker_haddr - words_u64(w, 4);
        calibrated = 1;
        return;
    case MSG_TEXT:
        text_lo = words_u64(w, 4);
        text_hi = words_u64(w + 4, 4);
        return;
    case MSG_LAYOUT:
        if (v->msg.have == 8 * LAYOUT_CLASSES) {
            for (int i = 0; i < 2 * LAYOUT_CLASSES; i++)
                layout[i] = words_u64(w + 4 * i, 4);
            have_layout = 1;
        }
        return;
    case MSG_PHASE:
        if (recording && v->msg.have == 2) {
            uint64_t label = 0;
            for (int i = 0; i < 4; i++) {
                uint8_t b = (uint8_t)(w[i / 2] >> (8 * (i % 2)));
                if (b)
                    label = label << 8 | b;
            }
            put(index, PHASE_MARK | label, NO_PADDR, 0, KIND_MARKER, 1);
        }
        return;
    case MSG_SHOOT:
        if (recording && v->msg.have == 17)
            put_shootdown(index, w);
        return;
    case MSG_STOP:
        if (recording && !stopped) {
            stopped = 1;
            recording = 0;
            end_stream();
        }
        return;
    case MSG_START:
    case MSG_SWITCH:
    case MSG_EXEC:
    case MSG_RENAME:
        break;
    default:
        return;
    }
    /* The probes run from the module's load on, before START: what they say then (whose
     * CR3 writes were not watched) is of no use, and would number address spaces that
     * never appear in the trace. */
    if (v->msg.have != TASK_WORDS || stopped || (!recording && v->msg.type != MSG_START))
        return;
    uint32_t pid = (uint32_t)words_u64(w, 2);
    uint32_t asid = asid_for(words_u64(w + 2, 4));
    char name[16];
    for (int i = 0; i < 8; i++) {
        name[2 * i] = (char)(w[6 + i] & 0xff);
        name[2 * i + 1] = (char)(w[6 + i] >> 8);
    }
    if (v->msg.type == MSG_START) {
        if (!recording)
            qemu_plugin_reset(plugin_id, on_reset);
        recording = 1;
        pthread_mutex_lock(&out_lock);
        if (have_layout && !closed) {
            put_block(TAG_LAYOUT, 0, 0, layout, sizeof layout);
            have_layout = 0;
        }
        pthread_mutex_unlock(&out_lock);
        v->asid = asid;
        v->pending = 0;
        v->n_saved = 0;
        v->cr3_read_end = 0;
        v->idle = 0;
        v->same_switch = 0;
        put(index, 0, NO_PADDR, 0, KIND_SWITCH, 1);
    } else if (v->msg.type == MSG_EXEC && asid) {
        v->asid = asid;
        v->pending = 0;
        v->same_switch = 0;
        v->n_saved = 0;
        put(index, 0, NO_PADDR, 0, KIND_SWITCH, 1);
    }
    if (v->msg.type == MSG_SWITCH && (pid == 0) != v->idle) {
        /* To or from the idle task: the idle loop's bounds. */
        v->idle = pid == 0;
        put(index, IDLE_MARK | (uint64_t)v->idle, NO_PADDR, 0, KIND_MARKER, 1);
    }
    if (v->msg.type == MSG_SWITCH && asid) {
        /* A task of the address space running (a thread, or after a kernel thread that
         * borrowed it) is switched to without a CR3 write: nothing is pending, and the next
         * CR3 write (exec's, say) must not take this one for it. */
        v->pending = asid == v->asid ? 0 : asid;
        v->same_switch = several_cpus && asid == v->asid;
    } else if (v->msg.type == MSG_SWITCH) {
        v->same_switch = 0;
    }
    if (asid && recording) {
        pthread_mutex_lock(&out_lock);
        if (!closed)
            note_proc(pid, asid, name);
        pthread_mutex_unlock(&out_lock);
    }
}

static void on_marker(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr,
                      void *udata)
{
    (void)info;
    struct vcpu *v = vcpus[vcpu];
    struct msg *m = &v->msg;
    uint16_t word = (uint16_t)vaddr;
    v->marker_haddr = ((const struct insn *)udata)->haddr;
    if (m->need == 0) {
        m->type = word >> 8;
        m->need = word & 0xff;
        m->have = 0;
        if (m->need > (int)(sizeof m->words / sizeof m->words[0])) {
            m->need = 0; /* not a message this plugin knows: resynchronise */
            return;
        }
        if (m->need == 0)
            on_message(vcpu, v);
        return;
    }
    m->words[m->have++] = word;
    if (m->have == m->need) {
        m->need = 0;
        on_message(vcpu, v);
    }
}

/* --- translation ---------------------------------------------------------------------- */

/* `mov %reg,%cr3` ([REX] 0F 22 /r, reg field 3) or `mov %cr3,%reg` (0F 20): the register
 * (REX.B and the r/m field), or -1 if the bytes are not that instruction. */
static int cr3_move(const uint8_t *b, size_t n, uint8_t op)
{
    size_t i = 0;
    int rex = 0;
    if (n > 0 && (b[0] & 0xf0) == 0x40)
        rex = b[i++];
    if (n < i + 3 || b[i] != 0x0f || b[i + 1] != op || ((b[i + 2] >> 3) & 7) != 3 ||
        (rex & 4) /* REX.R: CR11 */)
        return -1;
    return (b[i + 2] & 7) | (rex & 1) << 3;
}

/* Instruments the instructions of a block: all of them (`full`), or, before START, only the
 * marker instruction, so that the boot runs at nearly QEMU's own speed. */
static void instrument(struct qemu_plugin_tb *tb, int full)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t k = 0; k < n; k++) {
        struct qemu_plugin_insn *qi = qemu_plugin_tb_get_insn(tb, k);
        size_t size = qemu_plugin_insn_size(qi);
        const uint8_t *bytes = qemu_plugin_insn_data(qi);
        int marker = size == sizeof MARKER && memcmp(bytes, MARKER, sizeof MARKER) == 0;
        int reg = cr3_move(bytes, size, 0x22), cr3 = CR3_WRITE;
        if (reg < 0) {
            reg = cr3_move(bytes, size, 0x20);
            cr3 = reg < 0 ? 0 : CR3_READ;
        }
        if (!full && !marker)
            continue;
        uint64_t vaddr = qemu_plugin_insn_vaddr(qi);
        int tracing = vaddr >= text_lo && vaddr < text_hi;
        struct insn *i = insn_for(vaddr, (uint64_t)(uintptr_t)qemu_plugin_insn_haddr(qi),
                                  (uint16_t)size, cr3, cr3 ? reg : 0, tracing);
        if (full)
            qemu_plugin_register_vcpu_insn_exec_cb(
                qi,
                tracing              ? on_tracing_fetch
                : cr3 == CR3_WRITE ? on_cr3
                : cr3 == CR3_READ  ? on_cr3_read
                                   : on_fetch,
                QEMU_PLUGIN_CB_NO_REGS, i);
        /* QEMU 7.2 never calls a callback registered for QEMU_PLUGIN_MEM_R alone: register
         * both directions and tell them apart with qemu_plugin_mem_is_store(). */
        qemu_plugin_register_vcpu_mem_cb(
            qi, marker ? on_marker : tracing ? on_tracing_mem : on_mem, QEMU_PLUGIN_CB_NO_REGS,
            QEMU_PLUGIN_MEM_RW, i);
    }
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    instrument(tb, 1);
}

static void on_tb_boot(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    instrument(tb, 0);
}

static void on_atexit(qemu_plugin_id_t id, void *udata);

/* After START: every translation is gone; instrument everything from now on. */
static void on_reset(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (vcpu >= MAX_VCPUS) {
        say("more than 64 vCPUs: cannot record this machine");
        _exit(3);
    }
    if (!vcpus[vcpu]) {
        struct vcpu *v = calloc(1, sizeof *v);
        if (!v) {
            say("out of memory");
            _exit(3);
        }
        vcpus[vcpu] = v;
    }
    pthread_mutex_lock(&out_lock);
    if (vcpu + 1 > n_vcpus)
        n_vcpus = vcpu + 1;
    pthread_mutex_unlock(&out_lock);
}

static void on_atexit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    /* Without STOP the workload did not finish: what was recorded goes out, without the END
     * block, so that the capture reads as incomplete. */
    if (stopped)
        return;
    flush();
    pthread_mutex_lock(&out_lock);
    closed = 1;
    close(out_fd);
    pthread_mutex_unlock(&out_lock);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (!info->system_emulation) {
        say("this plugin records whole systems (qemu-system-*); use lookaside-plugin for "
            "user-level programs");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        int r = output_arg(argv[i]);
        if (r < 0)
            return -1;
        if (r == 1)
            continue;
        if (strncmp(argv[i], "ram=", 4) == 0) {
            char *end;
            ram_bytes = strtoull(argv[i] + 4, &end, 10);
            if (*end || ram_bytes == 0) {
                say("ram=BYTES: not a positive number of bytes");
                return -1;
            }
            continue;
        }
        char msg[512];
        snprintf(msg, sizeof msg, "unknown argument '%s' (expected fd=N, out=PATH or ram=BYTES)",
                 argv[i]);
        say(msg);
        return -1;
    }
    if (open_stream(2, sizeof(struct rec)) < 0)
        return -1;
    several_cpus = info->system.smp_vcpus > 1;
    plugin_id = id;
    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_boot);
    qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
    return 0;
}
