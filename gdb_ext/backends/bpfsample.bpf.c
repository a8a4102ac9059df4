// The kernel half of record's BPF sampler (bpfsample.py): run at each
// CPU-clock perf event of a sampled thread, in that thread's context,
// without stopping it.  It copies what recorder.copy_moment copies at a
// ptrace stop, for this one thread: its user registers, its C stack from
// below the stack pointer, each VM's GG_State, and the lua_States the
// frame walk needs (the running one, the main one, the ones the chain of
// C frames names) with their stacks, and writes them as one record into a
// ring buffer.  It only reads.
//
// No offset of LuaJIT is written here: each process's VMs and the layout
// of their structures (from DWARF or a layout profile) come from user
// space in the `procs` map, keyed by the process id.  Memory is copied in
// whole pages (the recorder's block size), each page read alone, so a
// range that runs past its mapping loses only the pages beyond it.
//
// x86-64 only for now (pt_regs below); arm64 takes user_pt_regs and its
// own register count (docs/internals.md).
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#define PAGE 4096ULL
#define MAX_VMS 4
#define MAX_LS 8            // lua_States copied per VM
#define MAX_CHAIN 8         // C frames followed per lua_State
#define MAX_RANGES 64
#define DATA_MAX (512 * 1024)
#define NREGS 21            // struct pt_regs, x86-64
#define SP_INDEX 19         // rsp
#define CS_INDEX 17
#define NONE 0xffffffffu

struct vmconf {
    __u64 G[MAX_VMS];
    __u32 nvms;
    __u32 gg_off;           // G - GG
    __u32 gg_size;
    __u32 cur_L;            // offsetof(global_State, cur_L) or NONE
    __u32 jit_L;            // (2.0) offsetof(global_State, jit_L) or NONE
    __u32 mainthref;
    __u32 ref_size, mref_size;
    __u32 L_size, L_stack, L_stacksize, L_cframe, L_gct, L_glref;
    __u32 cfo_L, cfo_prev;  // the C frame's SAVE_L and prev, or NONE
    __u32 gct_thread;
    __u32 below, above;     // C stack copied: below and above the stack pointer
    __u32 max_stack;        // bytes of a Lua stack copied at most
};

struct range {
    __u64 lo, hi;           // tried, in whole pages
    __u64 got;              // bytes copied from lo
};

struct sample {
    __u32 magic, tid, tgid, flags;
    __u64 time_ns;
    __u64 regs[NREGS];
    __u32 nranges, nls;
    __u64 data_len;
    struct range ranges[MAX_RANGES];
    __u64 Ls[MAX_LS];       // (work list, not read by user space)
    __u8 data[DATA_MAX];
};

#define MAGIC 0x4c4a4270u   // "LJBp"
#define F_KERNEL 1          // the event landed in the kernel: task's user registers
#define F_FULL 2            // a copy did not fit (data or ranges)
#define F_NOREGS 4

enum { ST_FIRED, ST_WRITTEN, ST_LOST, ST_FULL, ST_OTHER, ST_N };

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, struct vmconf);
} procs SEC(".maps");

// Per thread, the lua_States its last samples' walks went through, handed
// back by user space: on 2.0 (no g->cur_L) a coroutine's lua_State is found
// from the interpreter's C frame only while the interpreter runs it, and a
// lua_State that only the machine frames name (the caller of a finalizer)
// is on no chain of C frames this program follows.
#define MAX_RECENT 4
struct recent {
    __u64 L[MAX_RECENT];
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct recent);
} recents SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);         // set to the CPU count by the loader
    __type(key, __u32);
    __type(value, struct sample);
} scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, ST_N);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 16 << 20);  // set by the loader
} samples SEC(".maps");

static __always_inline void count(__u32 k)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &k);
    if (v)
        *v += 1;
}

static __always_inline __u64 rd(__u64 addr, __u32 size)
{
    __u64 v = 0;
    if (bpf_probe_read_user(&v, sizeof(v), (void *)addr) != 0)
        return 0;
    if (size == 4)
        v &= 0xffffffffULL;
    return v;
}

// A new range [lo, hi), nothing got yet: its index, or -1 when the record
// holds MAX_RANGES already.
static __noinline long add_range(struct sample *s, __u64 lo, __u64 hi)
{
    __u64 n = s->nranges;
    if (n >= MAX_RANGES) {
        s->flags |= F_FULL;
        return -1;
    }
    barrier_var(n);
    n &= MAX_RANGES - 1;
    s->ranges[n].lo = lo;
    s->ranges[n].hi = hi;
    s->ranges[n].got = 0;
    s->nranges = n + 1;
    return n;
}

struct span {
    struct sample *s;
    __u64 lo, hi;
    struct range *r;
};

static long trim(__u32 i, void *arg)        // pages held already: not again
{
    struct span *p = arg;
    if (i >= p->s->nranges)
        return 1;
    __u64 idx = i;
    barrier_var(idx);
    idx &= MAX_RANGES - 1;
    struct range *r = &p->s->ranges[idx];
    __u64 end = r->lo + r->got;
    if (r->lo <= p->lo && p->lo < end)
        p->lo = end;
    if (r->lo < p->hi && p->hi <= end)
        p->hi = r->lo;
    return 0;
}

static long one_page(__u32 k, void *arg)
{
    struct span *p = arg;
    struct sample *s = p->s;
    __u64 page = p->lo + (__u64)k * PAGE;
    if (page >= p->hi)
        return 1;
    __u64 off = s->data_len;
    if (off > DATA_MAX - PAGE) {
        s->flags |= F_FULL;
        return 1;
    }
    if (bpf_probe_read_user(&s->data[off], PAGE, (void *)page) != 0)
        return 1;
    s->data_len = off + PAGE;
    p->r->got += PAGE;
    return 0;
}

// Copy [lo, hi) widened to whole pages, less the pages copied already; a
// page that cannot be read ends the range.
static __noinline int copy(struct sample *s, __u64 lo, __u64 hi)
{
    struct span p = {.s = s};
    p.lo = lo & ~(PAGE - 1);
    p.hi = (hi + PAGE - 1) & ~(PAGE - 1);
    if (p.hi <= p.lo)
        return 0;
    if (p.hi - p.lo > DATA_MAX)
        p.hi = p.lo + DATA_MAX;
    bpf_loop(MAX_RANGES, trim, &p, 0);
    if (p.hi <= p.lo)
        return 0;
    long n = add_range(s, p.lo, p.hi);
    if (n < 0)
        return -1;
    __u64 k = n;
    barrier_var(k);
    k &= MAX_RANGES - 1;
    p.r = &s->ranges[k];
    bpf_loop(DATA_MAX / PAGE, one_page, &p, 0);
    return 0;
}

// A range looked at and not copied (a lua_State candidate that is not a
// thread of the VM): listed as tried, with nothing got, so the decoding
// knows it was looked at (as the ptrace sampler's copy lists a range it
// could not read).
static __always_inline void note(struct sample *s, __u64 lo, __u64 hi)
{
    add_range(s, lo & ~(PAGE - 1), (hi + PAGE - 1) & ~(PAGE - 1));
}

static __always_inline void add_L(struct sample *s, __u64 L)
{
    if (!L || (L & 7))
        return;
    for (int i = 0; i < MAX_LS; i++) {
        if (i >= s->nls)
            break;
        __u64 k = i;
        barrier_var(k);
        k &= MAX_LS - 1;
        if (s->Ls[k] == L)
            return;
    }
    __u32 n = s->nls;
    if (n < MAX_LS) {
        __u64 k = n;
        barrier_var(k);
        k &= MAX_LS - 1;
        s->Ls[k] = L;
        s->nls = n + 1;
    }
}

struct walk {
    struct sample *s;
    struct vmconf *c;
    __u64 G, cf;
};

// One C frame of a lua_State's chain: copied, its lua_State added.
static long one_cframe(__u32 j, void *arg)
{
    struct walk *w = arg;
    struct vmconf *c = w->c;
    __u64 cf = w->cf;
    if (!cf)
        return 1;
    copy(w->s, cf, cf + 64);
    add_L(w->s, rd(cf + c->cfo_L, c->ref_size));
    w->cf = rd(cf + c->cfo_prev, 8) & ~3ULL;
    return 0;
}

// One lua_State of the work list: checked to be a thread of this VM, then
// copied with its stack, and the lua_States its C frames name added.
static long one_L(__u32 i, void *arg)
{
    struct walk *w = arg;
    struct sample *s = w->s;
    struct vmconf *c = w->c;
    if (i >= s->nls)
        return 1;
    __u64 k = i;
    barrier_var(k);
    k &= MAX_LS - 1;
    __u64 L = s->Ls[k];
    __u8 gct = 0;
    bpf_probe_read_user(&gct, 1, (void *)(L + c->L_gct));
    if (gct != c->gct_thread || rd(L + c->L_glref, c->mref_size) != w->G) {
        note(s, L, L + c->L_size);
        return 0;
    }
    copy(s, L, L + c->L_size);
    __u64 stack = rd(L + c->L_stack, c->mref_size);
    __u64 size = rd(L + c->L_stacksize, 4) * 8;
    if (size > c->max_stack)
        size = c->max_stack;
    if (stack)
        copy(s, stack, stack + size);
    if (c->cfo_L == NONE)
        return 0;
    w->cf = rd(L + c->L_cframe, 8) & ~3ULL;
    bpf_loop(MAX_CHAIN, one_cframe, w, 0);
    return 0;
}

static long one_vm(__u32 v, void *arg)
{
    struct walk *w = arg;
    struct vmconf *c = w->c;
    if (v >= c->nvms || v >= MAX_VMS)
        return 1;
    __u64 k = v;
    barrier_var(k);
    k &= MAX_VMS - 1;
    __u64 G = c->G[k];
    struct sample *s = w->s;
    w->G = G;
    copy(s, G - c->gg_off, G - c->gg_off + c->gg_size);
    s->nls = 0;
    add_L(s, rd(G + c->mainthref, c->ref_size));
    if (c->cur_L != NONE)
        add_L(s, rd(G + c->cur_L, c->ref_size));
    if (c->jit_L != NONE)
        add_L(s, rd(G + c->jit_L, c->ref_size));
    // The interpreter's C frame's SAVE_L, if the thread is in the VM's code
    // (2.0 has no g->cur_L; on 2.1, g->cur_L lags behind a coroutine switch
    // for a few instructions: cframe.interpreter_thread).
    if (c->cfo_L != NONE)
        add_L(s, rd(s->regs[SP_INDEX] + c->cfo_L, c->ref_size));
    __u32 tid = s->tid;
    struct recent *r = bpf_map_lookup_elem(&recents, &tid);
    if (r) {
        for (int i = 0; i < MAX_RECENT; i++)
            add_L(s, r->L[i]);
    }
    bpf_loop(MAX_LS, one_L, w, 0);
    return 0;
}

SEC("perf_event")
int ljgdb_sample(struct bpf_perf_event_data *ctx)
{
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tgid = id >> 32;
    count(ST_FIRED);
    struct vmconf *c = bpf_map_lookup_elem(&procs, &tgid);
    if (!c) {
        count(ST_OTHER);
        return 0;
    }
    __u32 cpu = bpf_get_smp_processor_id();
    struct sample *s = bpf_map_lookup_elem(&scratch, &cpu);
    if (!s)
        return 0;
    s->magic = MAGIC;
    s->tid = (__u32)id;
    s->tgid = tgid;
    s->flags = 0;
    s->nranges = 0;
    s->nls = 0;
    s->data_len = 0;
    s->time_ns = bpf_ktime_get_ns();
    if ((ctx->regs.cs & 3) == 3) {
        struct pt_regs *r = &ctx->regs;
        s->regs[0] = r->r15; s->regs[1] = r->r14; s->regs[2] = r->r13;
        s->regs[3] = r->r12; s->regs[4] = r->rbp; s->regs[5] = r->rbx;
        s->regs[6] = r->r11; s->regs[7] = r->r10; s->regs[8] = r->r9;
        s->regs[9] = r->r8; s->regs[10] = r->rax; s->regs[11] = r->rcx;
        s->regs[12] = r->rdx; s->regs[13] = r->rsi; s->regs[14] = r->rdi;
        s->regs[15] = r->orig_rax; s->regs[16] = r->rip; s->regs[17] = r->cs;
        s->regs[18] = r->eflags; s->regs[19] = r->rsp; s->regs[20] = r->ss;
    } else {
        // In the kernel (a system call, a fault): the registers the task
        // entered it with.
        s->flags |= F_KERNEL;
        void *r = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
        if (!r || bpf_probe_read_kernel(s->regs, sizeof(s->regs), r) != 0) {
            s->flags |= F_NOREGS;
            __builtin_memset(s->regs, 0, sizeof(s->regs));
        }
    }
    __u64 sp = s->regs[SP_INDEX];
    if (sp)
        copy(s, sp - c->below, sp + c->above);
    struct walk w = {.s = s, .c = c, .G = 0, .cf = 0};
    bpf_loop(MAX_VMS, one_vm, &w, 0);
    if (s->flags & F_FULL)
        count(ST_FULL);
    __u64 len = s->data_len;
    if (len > DATA_MAX)
        len = DATA_MAX;
    __u64 total = __builtin_offsetof(struct sample, data) + len;
    if (total > sizeof(struct sample))
        return 0;
    if (bpf_ringbuf_output(&samples, s, total, BPF_RB_NO_WAKEUP) != 0)
        count(ST_LOST);
    else
        count(ST_WRITTEN);
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
