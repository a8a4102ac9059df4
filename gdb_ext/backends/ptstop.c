/* ptstop: one sample's stop of a Linux process, in C (record's pause).
 *
 * ljgdb's live backend (live.py) stops a process with ptrace from Python;
 * each request costs microseconds of Python around it.  This file does the
 * same requests, and only those, in one call: PTRACE_SEIZE and
 * PTRACE_INTERRUPT of every thread (listing /proc/PID/task again until no
 * new thread appears; each thread's scheduling state read from /proc
 * before), waitpid for each stop, PTRACE_GETREGSET
 * (NT_PRSTATUS), process_vm_readv of the ranges the caller asks for and of
 * each thread's stack around its stack pointer and of the objects whose
 * address is read at the stop (pts_follow), then PTRACE_DETACH with the
 * signal each thread was about to take.  It knows nothing of LuaJIT: which
 * ranges to copy is the engine's choice (recorder.py).  It never writes to
 * the process.
 *
 * Built by ptstop.py with the system's C compiler into ljgdb's cache and
 * loaded with ctypes; without a compiler record samples in Python.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

#define SEIZE 0x4206
#define INTERRUPT 0x4207
#define DETACH 17
#define GETREGSET 0x4204
#define EVENT_STOP 128
#define NT_PRSTATUS_ 1
#define WALL_ 0x40000000
#define PAGE 4096UL
#define NREGS 64
#define POLL_NS 30000           /* how long wait_stop asks before it sleeps */

struct pts_thread {
    int32_t tid;
    int32_t state;      /* 0 stopped, registers read; 1 gone; 2 registers unreadable */
    int32_t sig;        /* signal passed on at the detach (its stop's, 0 if none) */
    int32_t nregs;      /* 8-byte words of regs filled */
    char sched;         /* before the stop: the state letter of /proc/PID/task/TID/stat */
    char running;       /* 'R' and on a CPU ("running" in /proc/PID/task/TID/syscall) */
    char pad[6];
    uint64_t regs[NREGS];
    uint64_t stack_lo;  /* the stack copied: stack_got bytes from stack_lo, */
    uint64_t stack_hi;  /* of [stack_lo, stack_hi) tried */
    int64_t stack_got;
};

struct pts_range {
    uint64_t lo, hi;    /* [lo, hi) */
    uint64_t offset;    /* where in the buffer */
    int64_t got;        /* bytes read from lo (-1: none) */
};

/* An object to copy whose address is read at the stop (the running
 * lua_State: g->cur_L changes at each coroutine switch), with the array it
 * points to (the lua_State's stack): read the word at `at` (at_size bytes,
 * masked), copy the object's size bytes there, read its array's address
 * (array_at_size bytes at array_at) and count (32 bits at count_at), copy
 * count * item bytes there.  Each copy is widened to whole pages; out:
 * obj and array, as ranges are (got -1: not read; 0: a range of the plan
 * holds it). */
struct pts_follow {
    uint64_t at;
    uint64_t mask;
    uint32_t at_size, size;
    uint32_t array_at, array_at_size;
    uint32_t count_at, item;
    struct pts_range obj, array;
};

struct pts_result {
    int32_t nthreads;
    int32_t err;        /* errno of a refused seize, ETIMEDOUT, E2BIG, ENOSYS (no process_vm_readv) */
    int32_t err_tid;
    int32_t pad;
    uint64_t held_ns;   /* from before the first seize to after the last detach */
    uint64_t wait_ns;   /* from the first interrupts until the first threads stopped */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Whether a thread whose seize failed is ours already (one that exited while
 * held, still listed) or ending (zombie): /proc/PID/task/TID/status. */
static int ours_or_gone(int pid, int tid)
{
    char path[64], line[256];
    int tracer = -1, gone = 1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", pid, tid);
    f = fopen(path, "r");
    if (!f)
        return 1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "State:", 6)) {
            char *p = line + 6;
            while (*p == ' ' || *p == '\t')
                p++;
            gone = (*p == 'Z' || *p == 'X' || *p == 0);
        } else if (!strncmp(line, "TracerPid:", 10)) {
            tracer = atoi(line + 10);
        }
    }
    fclose(f);
    return gone || tracer == (int)getpid();
}

/* The /proc files read before each stop, kept open from one stop to the
 * next (a sampler lists the threads and reads their states many times a
 * second; opening the files again costs more than reading them): the
 * task directory, and of the first KEPT threads their stat and syscall
 * files.  All for one process at a time. */
#define KEPT 64
static int kept_pid = -1;
static DIR *task_dir;
static struct { int tid, stat_fd, sys_fd; } kept[KEPT];
static int nkept;

static void forget_files(void)
{
    if (task_dir)
        closedir(task_dir);
    task_dir = NULL;
    for (int i = 0; i < nkept; i++) {
        close(kept[i].stat_fd);
        if (kept[i].sys_fd >= 0)
            close(kept[i].sys_fd);
    }
    nkept = 0;
    kept_pid = -1;
}

/* The threads of pid (/proc/PID/task) into tids, at most max; how many,
 * -1 when the directory cannot be read (the process is gone). */
static int list_tasks(int pid, int32_t *tids, int max)
{
    int n = 0;
    if (kept_pid != pid) {
        forget_files();
        kept_pid = pid;
    }
    if (task_dir) {
        rewinddir(task_dir);
    } else {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task", pid);
        task_dir = opendir(path);
        if (!task_dir)
            return -1;
    }
    struct dirent *e;
    errno = 0;
    while ((e = readdir(task_dir)) && n < max)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            tids[n++] = atoi(e->d_name);
    if (errno && !n) {          /* (the process ended: its directory is empty or gone) */
        forget_files();
        return -1;
    }
    return n;
}

static ssize_t read_fd(int fd, char *buf, size_t n)
{
    ssize_t got = pread(fd, buf, n - 1, 0);
    if (got >= 0)
        buf[got] = 0;
    return got;
}

static int open_task_file(int pid, int tid, const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tid, name);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Thread tid's place in kept: found, or made (its stat file opened) while
 * there is room; -1 when there is none, -2 when the file cannot be opened
 * (the thread is gone). */
static int kept_slot(int pid, int tid)
{
    for (int i = 0; i < nkept; i++)
        if (kept[i].tid == tid)
            return i;
    if (nkept == KEPT)
        return -1;
    int fd = open_task_file(pid, tid, "stat");
    if (fd < 0)
        return -2;
    kept[nkept].tid = tid;
    kept[nkept].stat_fd = fd;
    kept[nkept].sys_fd = -1;
    return nkept++;
}

/* Forget a kept thread that is gone (its tid may come back as another
 * thread's). */
static void drop_slot(int i)
{
    close(kept[i].stat_fd);
    if (kept[i].sys_fd >= 0)
        close(kept[i].sys_fd);
    kept[i] = kept[--nkept];
}

/* The scheduling state letter of a thread (0 when gone), and for 'R'
 * whether it is on a CPU now (the kernel says "running" in its syscall
 * file then; a runnable thread that waits for a CPU shows its registers).
 * The files of a thread with no place in kept are opened and closed here. */
static char sched_state(int pid, int tid, char *running)
{
    char buf[512];
    int k = kept_slot(pid, tid);
    int fd = k >= 0 ? kept[k].stat_fd : k == -1 ? open_task_file(pid, tid, "stat") : -1;
    *running = 0;
    if (fd < 0)
        return 0;
    ssize_t got = read_fd(fd, buf, sizeof buf);
    if (k < 0)
        close(fd);
    if (got <= 0) {
        if (k >= 0)
            drop_slot(k);
        return 0;
    }
    char *end = strrchr(buf, ')');      /* "tid (comm) S ...": comm may hold ')' */
    char state = end && end[1] && end[2] ? end[2] : 0;
    if (state == 'R') {
        int sys_fd = k >= 0 ? kept[k].sys_fd : -1;
        if (sys_fd < 0) {
            sys_fd = open_task_file(pid, tid, "syscall");
            if (k >= 0)
                kept[k].sys_fd = sys_fd;
        }
        *running = sys_fd < 0 || read_fd(sys_fd, buf, 16) < 0 || !strncmp(buf, "running", 7);
        if (k < 0 && sys_fd >= 0)
            close(sys_fd);
    }
    return state;
}

static int find(struct pts_thread *t, int n, int tid)
{
    for (int i = 0; i < n; i++)
        if (t[i].tid == tid)
            return i;
    return -1;
}

/* Wait for thread i's stop until deadline (ns); t[i].state stays -1 when it
 * did not stop in time. */
static void wait_stop(struct pts_thread *t, int sigwait, uint64_t deadline)
{
    int spins = 0;
    uint64_t first = 0;
    for (;;) {
        int status;
        pid_t got = waitpid(t->tid, &status, WALL_ | WNOHANG);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {          /* ECHILD: gone */
            t->state = 1;
            return;
        }
        if (got == t->tid) {
            if (WIFSTOPPED(status)) {
                t->state = 0;
                t->sig = (status >> 16) == EVENT_STOP ? 0 : WSTOPSIG(status);
            } else {
                t->state = 1;
            }
            return;
        }
        uint64_t now = now_ns();
        if (now >= deadline)
            return;
        /* Most stops come within tens of microseconds: ask again for a
         * while before sleeping (a sleep and its wakeup took about 20 us
         * more on a Firecracker VM: docs/benchmarks.md). */
        if (!first)
            first = now;
        if (now - first < POLL_NS)
            continue;
        if (sigwait) {
            /* SIGCHLD is blocked in this thread (the caller's doing): a stop
             * after the waitpid above leaves it pending. */
            sigset_t set;
            uint64_t left = deadline - now;
            struct timespec ts = {0, left < 2000000 ? (long)left : 2000000};
            sigemptyset(&set);
            sigaddset(&set, SIGCHLD);
            sigtimedwait(&set, NULL, &ts);
        } else if (++spins < 2000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 500000};
            nanosleep(&ts, NULL);
        }
    }
}

static long readv_one(int pid, uint64_t addr, char *dst, uint64_t n)
{
    struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)addr, n};
    return (long)process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

static uint64_t read_word(int pid, uint64_t addr, uint32_t size, int *ok)
{
    uint64_t v = 0;             /* (little-endian: x86-64 and arm64) */
    *ok = size <= 8 && readv_one(pid, addr, (char *)&v, size) == (long)size;
    return v;
}

/* Copy [lo, hi) widened to pages into fbuf at *used, room permitting; got
 * 0 when one of the ranges copied already holds it (plan: n of them). */
static void copy_range(int pid, struct pts_range *r, uint64_t lo, uint64_t hi, char *fbuf,
                       uint64_t fbuf_size, uint64_t *used, const struct pts_range *plan,
                       int n)
{
    r->lo = lo & ~(PAGE - 1);
    r->hi = (hi + PAGE - 1) & ~(PAGE - 1);
    r->got = -1;
    r->offset = *used;
    for (int i = 0; i < n; i++)
        if (plan[i].got > 0 && plan[i].lo <= r->lo && r->hi <= plan[i].lo + plan[i].got) {
            r->got = 0;
            return;
        }
    if (hi <= lo || r->hi - r->lo > fbuf_size - *used)
        return;
    r->got = readv_one(pid, r->lo, fbuf + *used, r->hi - r->lo);
    if (r->got > 0)
        *used += (uint64_t)r->got;
}

/* The word at addr from a range copied already (ranges' bytes at their
 * offsets in buf), else read now. */
static uint64_t word(int pid, uint64_t addr, uint32_t size, const struct pts_range *rs, int n,
                     const char *buf, int *ok)
{
    for (int i = 0; i < n; i++)
        if (rs[i].got > 0 && rs[i].lo <= addr && addr + size <= rs[i].lo + rs[i].got &&
                size <= 8) {
            uint64_t v = 0;
            memcpy(&v, buf + rs[i].offset + (addr - rs[i].lo), size);
            *ok = 1;
            return v;
        }
    return read_word(pid, addr, size, ok);
}

static void follow(int pid, struct pts_follow *f, char *fbuf, uint64_t fbuf_size,
                   uint64_t *used, const struct pts_range *plan, int n, const char *buf)
{
    int ok;
    f->obj.got = f->array.got = -1;
    f->obj.lo = f->obj.hi = f->array.lo = f->array.hi = 0;
    uint64_t p = word(pid, f->at, f->at_size, plan, n, buf, &ok) & f->mask;
    if (!ok || !p)
        return;
    copy_range(pid, &f->obj, p, p + f->size, fbuf, fbuf_size, used, plan, n);
    /* (The object's words: from the plan's copy or the one just made.) */
    const struct pts_range *in = f->obj.got > 0 ? &f->obj : plan;
    int nin = f->obj.got > 0 ? 1 : n;
    const char *inbuf = f->obj.got > 0 ? fbuf : buf;
    uint64_t a = word(pid, p + f->array_at, f->array_at_size, in, nin, inbuf, &ok);
    if (!ok || !a)
        return;
    uint64_t count = word(pid, p + f->count_at, 4, in, nin, inbuf, &ok);
    if (!ok)
        return;
    copy_range(pid, &f->array, a, a + count * f->item, fbuf, fbuf_size, used, plan, n);
}

/* Stop process pid, read, let it go.  Its threads are listed and their
 * scheduling states read first (before held_ns starts); threads: room for
 * max_threads; ranges: copied into buf at their offsets; follows: the
 * objects found at the stop, copied into fbuf (fbuf_size bytes) after the
 * ranges; stack_below/stack_above: each thread's stack copied from
 * (sp - stack_below) rounded down to a page to (sp + stack_above) rounded up,
 * into stacks (max_threads slots of stack_slot bytes); sp_index: the stack
 * pointer's word in NT_PRSTATUS; sigwait: SIGCHLD is blocked (sleep in
 * sigtimedwait); timeout_ms: for a thread's stop.  Returns 0, or -1 with
 * res->err set (every thread detached). */
int pts_sample(int pid, struct pts_thread *threads, int max_threads,
               struct pts_range *ranges, int nranges, char *buf,
               struct pts_follow *follows, int nfollows, char *fbuf, uint64_t fbuf_size,
               uint64_t stack_below, uint64_t stack_above, char *stacks, uint64_t stack_slot,
               int sp_index, int sigwait, int timeout_ms, struct pts_result *res)
{
    int n = 0, i, round;
    uint64_t start, asked = 0;
    int32_t listed[4096];
    char sched[4096], running[4096];
    int nlisted;

    memset(res, 0, sizeof *res);
    /* Each thread's scheduling state before the stop (the stop makes
     * every thread 't'). */
    nlisted = list_tasks(pid, listed, 4096);
    if (nlisted <= 0) {
        res->err = ESRCH;
        return -1;
    }
    for (i = 0; i < nlisted; i++)
        sched[i] = sched_state(pid, listed[i], &running[i]);
    start = now_ns();
    for (round = 0; round < 100; round++) {
        int first_new = n;
        for (i = 0; i < nlisted; i++) {
            int tid = listed[i];
            if (find(threads, n, tid) >= 0)
                continue;
            if (n >= max_threads) {
                res->err = E2BIG;
                goto fail;
            }
            if (ptrace(SEIZE, tid, 0, 0) == -1) {
                int e = errno;
                if (e == ESRCH || ours_or_gone(pid, tid))
                    continue;
                res->err = e;
                res->err_tid = tid;
                goto fail;
            }
            memset(&threads[n], 0, sizeof threads[n]);
            threads[n].tid = tid;
            if (round == 0) {
                threads[n].sched = sched[i];
                threads[n].running = running[i];
            }
            threads[n].state = -1;
            threads[n].stack_got = -1;
            n++;
            ptrace(INTERRUPT, tid, 0, 0);
        }
        if (n == first_new && round > 0)
            break;
        if (!asked)
            asked = now_ns();
        uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ULL;
        for (i = first_new; i < n; i++) {
            wait_stop(&threads[i], sigwait, deadline);
            if (threads[i].state == -1) {
                res->err = ETIMEDOUT;
                res->err_tid = threads[i].tid;
                goto fail;
            }
        }
        if (round == 0)
            res->wait_ns = now_ns() - asked;
        /* Threads started meanwhile: list again. */
        nlisted = list_tasks(pid, listed, 4096);
        if (nlisted < 0)
            break;
    }
    for (i = 0; i < n; i++) {
        struct pts_thread *t = &threads[i];
        struct iovec iov = {t->regs, sizeof t->regs};
        if (t->state != 0)
            continue;
        if (ptrace(GETREGSET, t->tid, (void *)NT_PRSTATUS_, &iov) == -1) {
            t->state = 2;
            continue;
        }
        t->nregs = (int)(iov.iov_len / 8);
        if (sp_index < t->nregs) {
            uint64_t sp = t->regs[sp_index];
            uint64_t lo = (sp - stack_below) & ~(PAGE - 1);
            uint64_t hi = (sp + stack_above + PAGE - 1) & ~(PAGE - 1);
            if (hi - lo > stack_slot)
                hi = lo + stack_slot;
            char *dst = stacks + (uint64_t)i * stack_slot;
            long got = readv_one(pid, lo, dst, hi - lo);
            if (got < 0 && (errno == ENOSYS || errno == EPERM)) {
                res->err = ENOSYS;
                goto fail;
            }
            if (got <= 0 && (sp & ~(PAGE - 1)) > lo) {      /* (a guard page below) */
                lo = sp & ~(PAGE - 1);
                got = readv_one(pid, lo, dst, hi - lo);
            }
            t->stack_lo = lo;
            t->stack_hi = hi;
            t->stack_got = got;
        }
    }
    for (i = 0; i < nranges; i++) {
        struct pts_range *r = &ranges[i];
        r->got = readv_one(pid, r->lo, buf + r->offset, r->hi - r->lo);
        if (r->got < 0 && (errno == ENOSYS || errno == EPERM)) {
            res->err = ENOSYS;
            goto fail;
        }
    }
    uint64_t used = 0;
    for (i = 0; i < nfollows; i++)
        follow(pid, &follows[i], fbuf, fbuf_size, &used, ranges, nranges, buf);
    for (i = 0; i < n; i++)
        ptrace(DETACH, threads[i].tid, 0, (void *)(uintptr_t)threads[i].sig);
    res->nthreads = n;
    res->held_ns = now_ns() - start;
    return 0;
fail:
    for (i = 0; i < n; i++) {
        if (threads[i].state == -1)     /* (seized, not seen to stop: a moment more) */
            wait_stop(&threads[i], sigwait, now_ns() + 1000000000ULL);
        ptrace(DETACH, threads[i].tid, 0, (void *)(uintptr_t)threads[i].sig);
    }
    res->nthreads = 0;
    res->held_ns = now_ns() - start;
    return -1;
}

/* One stop of a batch: pts_sample's own buffers (each stop of a batch
 * writes its own). */
struct pts_call {
    struct pts_thread *threads;
    struct pts_range *ranges;
    char *buf;
    struct pts_follow *follows;
    char *fbuf;
    char *stacks;
    struct pts_result *res;
    int64_t max_threads;
    uint64_t fbuf_size;
};

/* Stops made at the times due_ns[0..n) (CLOCK_MONOTONIC, absolute), each
 * into its own call's buffers, with no Python between them: the sampler
 * decodes them afterwards, together, on a CPU that has not idled since.
 * *done: the stops made.  0 when all were made; EINTR when a signal came
 * in a sleep (Ctrl-C: the caller's handler runs once this returns); -1
 * when stop *done failed (its result says why; no thread is held). */
int pts_batch(int pid, struct pts_call *calls, int n, const uint64_t *due_ns,
              int nranges, int nfollows, uint64_t stack_below, uint64_t stack_above,
              uint64_t stack_slot, int sp_index, int sigwait, int timeout_ms, int *done)
{
    int i;

    *done = 0;
    for (i = 0; i < n; i++) {
        struct pts_call *c = &calls[i];
        struct timespec ts;
        ts.tv_sec = (time_t)(due_ns[i] / 1000000000ULL);
        ts.tv_nsec = (long)(due_ns[i] % 1000000000ULL);
        if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            return EINTR;
        if (pts_sample(pid, c->threads, (int)c->max_threads, c->ranges, nranges, c->buf,
                       c->follows, nfollows, c->fbuf, c->fbuf_size, stack_below, stack_above,
                       c->stacks, stack_slot, sp_index, sigwait, timeout_ms, c->res) != 0)
            return -1;
        *done = i + 1;
    }
    return 0;
}
