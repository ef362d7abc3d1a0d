/*
 * Lookaside's QEMU TCG plugin (plugin API version 1): records every executed instruction
 * (a fetch of its bytes) and every memory access it makes (a load or a store, with its
 * size) of a program run under qemu-user, as a raw stream that `lookaside trace` turns into
 * a native trace. Build: gcc -O2 -shared -fPIC -o lookaside-plugin.so lookaside-plugin.c
 *
 * Arguments (-plugin lookaside-plugin.so,ARG,...):
 *   fd=N      write the stream to the inherited file descriptor N (a pipe), or
 *   out=PATH  write it to PATH (a file or a FIFO).
 *
 * The stream (all integers little-endian; read by crates/lookaside/src/trace/capture.rs,
 * which documents it byte by byte):
 *   header  16 bytes: "LKSCAPTR", u32 version (1), u32 record size (16)
 *   blocks  16-byte header {u32 tag, u32 vcpu, u64 count} followed, for a RECORDS block,
 *           by count records of 16 bytes {u64 vaddr, u16 size, u8 kind, 5 zero bytes}
 *           (kind 0 fetch, 1 load, 2 store, 3 system call: the call's number in place of
 *           vaddr, size 0);
 *           EXEC (the program is about to execve another one, which runs untraced: the
 *           stream may end here) and END (count = records written, vcpu = threads seen).
 *
 * Each thread of the guest is a vCPU with its own buffer of BUF_RECS records, written as one
 * block when full, so records of one thread are in execution order, and records of
 * different threads interleave block by block, in the order the blocks were written. A
 * forked child is not recorded (it closes its copy of the output); a program started by
 * execve runs natively, untraced.
 *
 * Nothing is allocated per record: the callbacks store into the buffer of their vCPU.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "lookaside-stream.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

enum { KIND_FETCH = 0, KIND_LOAD = 1, KIND_STORE = 2, KIND_SYSCALL = 3 };

#define BUF_RECS 4096u
#define MAX_VCPUS 4096u

struct rec {
    uint64_t addr;
    uint64_t word; /* size | kind << 16 */
};

struct vbuf {
    uint32_t n;
    uint32_t vcpu;
    struct rec recs[BUF_RECS];
};

static struct vbuf *bufs[MAX_VCPUS];
static unsigned n_vcpus;
static int is_child; /* this process is a fork of the traced one */
static int64_t exec_nr[2] = {-1, -1};

/* Writes the first n records of b. Called with out_lock held. */
static void emit_locked(struct vbuf *b, uint32_t n)
{
    if (n == 0 || closed)
        return;
    put_block(TAG_RECORDS, b->vcpu, n, b->recs, (size_t)n * sizeof(struct rec));
    if (!closed)
        written += n;
}

/* Writes out the records of b and empties it; called by the thread that owns b. The count is
 * reset under the lock, so that a flush at exit by another thread never writes them twice. */
static void flush(struct vbuf *b)
{
    if (is_child) {
        b->n = 0;
        return;
    }
    pthread_mutex_lock(&out_lock);
    emit_locked(b, __atomic_load_n(&b->n, __ATOMIC_ACQUIRE));
    __atomic_store_n(&b->n, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&out_lock);
}

static inline void put(unsigned int vcpu, uint64_t addr, uint64_t word)
{
    struct vbuf *b = bufs[vcpu];
    uint32_t n = b->n;
    b->recs[n].addr = addr;
    b->recs[n].word = word;
    /* Published after the record, so a flush at exit by another thread sees whole records. */
    __atomic_store_n(&b->n, n + 1, __ATOMIC_RELEASE);
    if (n + 1 == BUF_RECS)
        flush(b);
}

/* Instruction addresses below 2^56 travel packed with the size in the callback's data (on a
 * 64-bit host). */
static void on_insn(unsigned int vcpu, void *udata)
{
    uintptr_t v = (uintptr_t)udata;
    put(vcpu, v >> 8, (v & 0xff) | (uint64_t)KIND_FETCH << 16);
}

struct wide_insn {
    uint64_t vaddr;
    uint64_t size;
};

static void on_wide_insn(unsigned int vcpu, void *udata)
{
    const struct wide_insn *w = udata;
    put(vcpu, w->vaddr, w->size | (uint64_t)KIND_FETCH << 16);
}

static void on_mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *udata)
{
    (void)udata;
    uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
    uint64_t kind = qemu_plugin_mem_is_store(info) ? KIND_STORE : KIND_LOAD;
    put(vcpu, vaddr, size | kind << 16);
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        uint64_t size = qemu_plugin_insn_size(insn);
        if (sizeof(void *) == 8 && vaddr < (1ull << 56) && size < 256) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_insn, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)(vaddr << 8 | size));
        } else {
            /* Rare (kernel-half addresses): kept for as long as QEMU keeps the block. */
            struct wide_insn *w = malloc(sizeof *w);
            if (!w)
                abort();
            w->vaddr = vaddr;
            w->size = size;
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_wide_insn, QEMU_PLUGIN_CB_NO_REGS,
                                                   w);
        }
        /* QEMU 7.2 never calls a callback registered for QEMU_PLUGIN_MEM_R alone: register
         * both directions and tell them apart with qemu_plugin_mem_is_store(). */
        qemu_plugin_register_vcpu_mem_cb(insn, on_mem, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, NULL);
    }
}

static void on_vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (vcpu >= MAX_VCPUS) {
        say("more than 4096 threads at once: cannot record this program");
        _exit(3);
    }
    if (!bufs[vcpu]) {
        struct vbuf *b = calloc(1, sizeof *b);
        if (!b) {
            say("out of memory");
            _exit(3);
        }
        b->vcpu = vcpu;
        __atomic_store_n(&bufs[vcpu], b, __ATOMIC_RELEASE);
    }
    pthread_mutex_lock(&out_lock);
    if (vcpu + 1 > n_vcpus)
        n_vcpus = vcpu + 1;
    pthread_mutex_unlock(&out_lock);
}

/* A thread ends: its records go out now (QEMU may give its index to a later thread). */
static void on_vcpu_exit(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (vcpu < MAX_VCPUS && bufs[vcpu])
        flush(bufs[vcpu]);
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1,
                       uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6,
                       uint64_t a7, uint64_t a8)
{
    (void)id, (void)a1, (void)a2, (void)a3, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    if (is_child)
        return;
    /* Where the thread entered the kernel, in order with its references: a model of the
     * operating system serves the program's calls here. */
    if (num >= 0 && num <= 0xffffffffll)
        put(vcpu, (uint64_t)num, (uint64_t)KIND_SYSCALL << 16);
    if (num != exec_nr[0] && num != exec_nr[1])
        return;
    /* The program may be replaced: what this thread recorded goes out, then a mark saying
     * the stream may end here. If execve fails, recording simply goes on. */
    flush(bufs[vcpu]);
    pthread_mutex_lock(&out_lock);
    if (!closed)
        put_block(TAG_EXEC, vcpu, written, NULL, 0);
    pthread_mutex_unlock(&out_lock);
}

static void on_atexit(qemu_plugin_id_t id, void *udata)
{
    (void)id, (void)udata;
    if (is_child)
        return;
    pthread_mutex_lock(&out_lock);
    /* Other threads may still run: take the records each has published so far. */
    for (unsigned v = 0; v < n_vcpus; v++) {
        struct vbuf *b = __atomic_load_n(&bufs[v], __ATOMIC_ACQUIRE);
        if (b)
            emit_locked(b, __atomic_load_n(&b->n, __ATOMIC_ACQUIRE));
    }
    if (!closed) {
        put_block(TAG_END, n_vcpus, written, NULL, 0);
        closed = 1;
    }
    close(out_fd);
    pthread_mutex_unlock(&out_lock);
}

static void in_child(void)
{
    /* A forked child must not write into its parent's stream, nor keep it open. */
    is_child = 1;
    closed = 1;
    close(out_fd);
}

static void set_exec_numbers(const char *target)
{
    if (!target)
        return;
    if (strcmp(target, "x86_64") == 0) {
        exec_nr[0] = 59, exec_nr[1] = 322;
    } else if (strcmp(target, "i386") == 0) {
        exec_nr[0] = 11, exec_nr[1] = 358;
    } else if (strcmp(target, "aarch64") == 0 || strcmp(target, "riscv64") == 0 ||
               strcmp(target, "riscv32") == 0) {
        exec_nr[0] = 221, exec_nr[1] = 281;
    } else if (strcmp(target, "arm") == 0) {
        exec_nr[0] = 11, exec_nr[1] = 387;
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (info->system_emulation) {
        say("this plugin records user-level programs (qemu-user), not whole systems");
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        int r = output_arg(argv[i]);
        if (r < 0)
            return -1;
        if (r == 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "unknown argument '%s' (expected fd=N or out=PATH)",
                     argv[i]);
            say(msg);
            return -1;
        }
    }
    if (open_stream(1, sizeof(struct rec)) < 0)
        return -1;
    pthread_atfork(NULL, NULL, in_child);
    set_exec_numbers(info->target_name);

    qemu_plugin_register_vcpu_init_cb(id, on_vcpu_init);
    qemu_plugin_register_vcpu_exit_cb(id, on_vcpu_exit);
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
    return 0;
}
