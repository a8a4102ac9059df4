/* The thread scan's common case in C (driven by threadc.py): 10^6
   coroutines whose stacks look like ones threadscan.py already walked.

   It reads no memory.  It lists the bytes it needs (each lua_State, then
   the live part of each stack: [L->stack, L->base)), sorted into runs that
   the driver reads through the engine's page cache and feeds back.  For
   each thread it decides what ThreadScanner.scan's fast path decides
   before its walk: the status, a thread without frames, and whether the
   stack's bytes equal those of a known shape (threadscan's "shapes": a
   depth, and the bytes of every slot a walk read).  Everything else (a
   new shape, an error's stack, the running thread, a read that failed) is
   left for the Python scan, which adds the shapes it finds.

   Thread states (out_state): 0 left for Python; 1 suspended, 2 dead,
   3 idle (the status the fast path gives). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct threadc_layout {
    uint32_t lsize, fr2;
    uint32_t off[7], size[7];       /* gct status base top stack stacksize exdata (size 0: none) */
    uint32_t gct_thread, st_yield, st_ok;
    uint64_t main, skip1, skip2, cont_ffi_cb, maxrel;
};

typedef struct {
    uint64_t addr;
    uint32_t len, who;              /* bytes, the thread's index */
} req_t;

typedef struct {
    uint64_t rel, k0, k1;            /* depth and the innermost frame's bytes */
    uint32_t nreg, reg, want, ncb, cb;  /* offsets into the pools */
    int32_t next;                     /* the next shape of the same hash, -1 */
    int keyed;                        /* in the table (0: it can match no thread) */
} shape_t;

typedef struct {
    struct threadc_layout lay;
    uint64_t n;
    const uint64_t *Ls;
    uint8_t *state;
    int32_t *shape;
    uint32_t *stacksize;
    uint64_t *exdata, *stack, *base;
    uint8_t *pend;                  /* the status a thread gets if its stack matches */
    req_t *req;
    uint64_t nreq, head, *runs;
    shape_t *shapes;
    uint64_t nshapes, capshapes;
    uint32_t *regs, *cbs;
    uint8_t *wants;
    uint64_t nregs, capregs, ncbs, capcbs, nwants, capwants;
    int32_t *table;
    uint64_t tmask;
    int phase, oom;
} threadc_t;

static void *grow(void *p, uint64_t *cap, uint64_t need, size_t each, int *oom)
{
    if (need <= *cap)
        return p;
    uint64_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(p, c * each);
    if (!q) {
        *oom = 1;
        return NULL;
    }
    *cap = c;
    return q;
}

static inline uint64_t get(const uint8_t *p, uint32_t size)
{
    uint64_t v = 0;
    memcpy(&v, p, size);            /* little-endian targets only */
    return v;
}

threadc_t *threadc_new(const struct threadc_layout *lay, uint64_t n, const uint64_t *Ls,
                       uint8_t *state, int32_t *shape, uint32_t *stacksize, uint64_t *exdata)
{
    threadc_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->lay = *lay;
    h->n = n;
    h->Ls = Ls;
    h->state = state; h->shape = shape; h->stacksize = stacksize; h->exdata = exdata;
    h->stack = calloc(n ? n : 1, 8);
    h->base = calloc(n ? n : 1, 8);
    h->pend = calloc(n ? n : 1, 1);
    h->tmask = 63;
    h->table = malloc(64 * sizeof(int32_t));
    if (!h->stack || !h->base || !h->pend || !h->table) {
        free(h->stack); free(h->base); free(h->pend); free(h->table); free(h);
        return NULL;
    }
    memset(h->table, 0xff, 64 * sizeof(int32_t));
    return h;
}

void threadc_free(threadc_t *h)
{
    if (!h)
        return;
    free(h->stack); free(h->base); free(h->pend); free(h->req); free(h->runs); free(h->shapes);
    free(h->regs); free(h->cbs); free(h->wants); free(h->table);
    free(h);
}

static inline uint64_t hash3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ b;
    x = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ull ^ c;
    return x ^ (x >> 32);
}

static void rehash(threadc_t *h)
{
    uint64_t size = h->tmask + 1;
    while (size < 2 * h->nshapes)
        size *= 2;
    int32_t *t = malloc(size * sizeof(int32_t));
    if (!t) {
        h->oom = 1;
        return;
    }
    memset(t, 0xff, size * sizeof(int32_t));
    free(h->table);
    h->table = t;
    h->tmask = size - 1;
    for (uint64_t i = 0; i < h->nshapes; i++) {
        shape_t *s = &h->shapes[i];
        if (!s->keyed)
            continue;
        uint64_t j = hash3(s->rel, s->k0, s->k1) & h->tmask;
        s->next = t[j];
        t[j] = (int32_t)i;
    }
}

/* The innermost frame's bytes at depth rel of the stack at p: one word
   (X64) or two (FR2), threadscan's shape key with rel. */
static inline void key_of(const threadc_t *h, const uint8_t *p, uint64_t rel,
                          uint64_t *k0, uint64_t *k1)
{
    if (h->lay.fr2) {
        *k0 = get(p + rel - 16, 8);
        *k1 = get(p + rel - 8, 8);
    } else {
        *k0 = get(p + rel - 8, 8);
        *k1 = 0;
    }
}

/* A shape as shape number (in the order added): depth rel, nreg regions
   [start, end) of the stack (from its first byte) and want, their bytes
   one after another; ncb words that must not be an FFI callback's
   continuation.  0, or -1 out of memory. */
int threadc_add_shape(threadc_t *h, uint64_t rel, uint32_t nreg, const uint32_t *regs,
                      const uint8_t *want, uint32_t nwant, uint32_t ncb, const uint32_t *cbs)
{
    shape_t *s = grow(h->shapes, &h->capshapes, h->nshapes + 1, sizeof(shape_t), &h->oom);
    if (!s)
        return -1;
    h->shapes = s;
    uint32_t *r = grow(h->regs, &h->capregs, h->nregs + 2 * nreg, 4, &h->oom);
    if (!r)
        return -1;
    h->regs = r;
    uint32_t *c = grow(h->cbs, &h->capcbs, h->ncbs + ncb + 1, 4, &h->oom);
    if (!c)
        return -1;
    h->cbs = c;
    uint8_t *w = grow(h->wants, &h->capwants, h->nwants + nwant + 1, 1, &h->oom);
    if (!w)
        return -1;
    h->wants = w;
    shape_t *x = &h->shapes[h->nshapes];
    x->rel = rel;
    x->next = -1;
    x->keyed = 0;
    x->k0 = x->k1 = 0;
    x->nreg = nreg; x->reg = (uint32_t)h->nregs;
    x->ncb = ncb; x->cb = (uint32_t)h->ncbs;
    x->want = (uint32_t)h->nwants;
    memcpy(r + h->nregs, regs, 8 * (size_t)nreg);
    memcpy(c + h->ncbs, cbs, 4 * (size_t)ncb);
    memcpy(w + h->nwants, want, nwant);
    h->nregs += 2 * nreg; h->ncbs += ncb; h->nwants += nwant;
    /* its key: the innermost frame's bytes, inside the bytes read */
    uint8_t tmp[16] = {0};
    uint64_t first = h->lay.fr2 ? 16 : 8, pos = 0, k0 = 0, k1 = 0;
    h->nshapes++;
    if (rel < first)
        return 0;                   /* no frame to key it by: never matched */
    uint64_t span = 0;
    for (uint32_t i = 0; i < nreg; i++) {
        if (regs[2 * i + 1] > rel || regs[2 * i] > regs[2 * i + 1])
            return 0;               /* bytes past the thread's base: never matched */
        span += regs[2 * i + 1] - regs[2 * i];
    }
    if (span != nwant)
        return 0;
    for (uint32_t i = 0; i < ncb; i++)
        if (cbs[i] + 8ull > rel)
            return 0;
    for (uint32_t i = 0; i < nreg; i++) {
        uint32_t a = regs[2 * i], b = regs[2 * i + 1];
        for (uint32_t o = a; o < b; o++, pos++)
            if (o >= rel - first && o < rel)
                tmp[o - (rel - first)] = want[pos];
    }
    key_of(h, tmp, first, &k0, &k1);
    x->k0 = k0; x->k1 = k1;
    x->keyed = 1;
    if (h->nshapes * 2 > h->tmask + 1) {
        rehash(h);
        return h->oom ? -1 : 0;
    }
    uint64_t j = hash3(rel, k0, k1) & h->tmask;
    x->next = h->table[j];
    h->table[j] = (int32_t)(h->nshapes - 1);
    return 0;
}

static int32_t match(const threadc_t *h, const uint8_t *p, uint64_t rel)
{
    uint64_t k0, k1;
    key_of(h, p, rel, &k0, &k1);
    for (int32_t i = h->table[hash3(rel, k0, k1) & h->tmask]; i >= 0; i = h->shapes[i].next) {
        const shape_t *s = &h->shapes[i];
        if (s->rel != rel || s->k0 != k0 || s->k1 != k1)
            continue;
        const uint8_t *w = h->wants + s->want;
        int same = 1;
        for (uint32_t r = 0; r < s->nreg && same; r++) {
            uint32_t a = h->regs[s->reg + 2 * r], b = h->regs[s->reg + 2 * r + 1];
            same = memcmp(p + a, w, b - a) == 0;
            w += b - a;
        }
        for (uint32_t c = 0; c < s->ncb && same; c++)
            if (get(p + h->cbs[s->cb + c], 8) == h->lay.cont_ffi_cb)
                same = 0;
        if (same)
            return i;
    }
    return -1;
}

static int add_req(threadc_t *h, uint64_t addr, uint32_t len, uint32_t who, uint64_t *cap)
{
    req_t *r = grow(h->req, cap, h->nreq + 1, sizeof(req_t), &h->oom);
    if (!r)
        return -1;
    h->req = r;
    r[h->nreq].addr = addr; r[h->nreq].len = len; r[h->nreq].who = who;
    h->nreq++;
    return 0;
}

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ((const req_t *)a)->addr, y = ((const req_t *)b)->addr;
    return x < y ? -1 : x > y;
}

/* The requests of phase 0 (every thread's lua_State) or 1 (the live
   stack of each thread phase 0 left waiting for it), sorted and grouped
   into runs: neighbours less than gap bytes apart share one, up to maxrun
   bytes.  The number of runs; *out: three words each (first address,
   length, requests).  -1: out of memory. */
int64_t threadc_plan(threadc_t *h, int phase, uint64_t gap, uint64_t maxrun, const uint64_t **out)
{
    uint64_t cap = 0;
    free(h->req); free(h->runs);
    h->req = NULL; h->runs = NULL;
    h->nreq = h->head = 0;
    h->phase = phase;
    for (uint64_t i = 0; i < h->n; i++) {
        if (phase == 0) {
            if (add_req(h, h->Ls[i], h->lay.lsize, (uint32_t)i, &cap))
                return -1;
        } else if (h->pend[i]) {
            if (add_req(h, h->stack[i], (uint32_t)(h->base[i] - h->stack[i]), (uint32_t)i, &cap))
                return -1;
        }
    }
    qsort(h->req, h->nreq, sizeof(req_t), by_addr);
    uint64_t nr = 0, capr = 0;
    for (uint64_t k = 0; k < h->nreq; k++) {
        uint64_t a = h->req[k].addr, end = a + h->req[k].len;
        if (nr) {
            uint64_t *r = &h->runs[3 * (nr - 1)];
            uint64_t rend = r[0] + r[1];
            if (a <= rend + gap && (end <= rend || end - r[0] <= maxrun)) {
                if (end > rend)
                    r[1] = end - r[0];
                r[2]++;
                continue;
            }
        }
        uint64_t *g = grow(h->runs, &capr, 3 * (nr + 1), 8, &h->oom);
        if (!g)
            return -1;
        h->runs = g;
        g[3 * nr] = a; g[3 * nr + 1] = h->req[k].len; g[3 * nr + 2] = 1;
        nr++;
    }
    *out = h->runs;
    return (int64_t)nr;
}

/* A thread's lua_State at p: its status, or 0 with its stack and base
   kept for phase 1, or 0 and nothing kept (the Python scan's). */
static void header(threadc_t *h, uint32_t i, const uint8_t *p)
{
    const struct threadc_layout *y = &h->lay;
    uint64_t L = h->Ls[i];
    uint64_t gct = get(p + y->off[0], y->size[0]), status = get(p + y->off[1], y->size[1]);
    uint64_t base = get(p + y->off[2], y->size[2]), top = get(p + y->off[3], y->size[3]);
    uint64_t stack = get(p + y->off[4], y->size[4]), ss = get(p + y->off[5], y->size[5]);
    uint8_t st;
    h->shape[i] = -1;
    if (L == y->skip1 || L == y->skip2 || gct != y->gct_thread || !ss || ss >= (1u << 24))
        return;
    if (status == y->st_yield)
        st = 1;
    else if (status != y->st_ok)
        return;                             /* an error's stack */
    else if (base > stack + 8 * (1 + y->fr2))
        return;                             /* 'normal': it resumed another */
    else if (L == y->main)
        st = 3;
    else if (top == base)
        st = 2;
    else
        st = 1;
    uint64_t end = stack + 8 * ss;
    if (!(stack <= base && base <= end))
        return;
    h->stacksize[i] = (uint32_t)ss;
    h->exdata[i] = y->size[6] ? get(p + y->off[6], y->size[6]) : 0;
    if (base - 8 <= stack + 8 * y->fr2) {   /* no frame: fresh, dead or idle */
        h->state[i] = st;
        return;
    }
    if (base - stack > y->maxrel)
        return;
    h->stack[i] = stack;
    h->base[i] = base;
    h->pend[i] = st;
}

/* Decode every waiting request within [base, base + len) (buf holds
   those bytes), in the order planned.  The number decoded. */
int64_t threadc_feed(threadc_t *h, uint64_t base, const uint8_t *buf, uint64_t len)
{
    int64_t done = 0;
    while (h->head < h->nreq) {
        const req_t *r = &h->req[h->head];
        if (r->addr < base || r->addr + r->len > base + len)
            break;
        h->head++;
        const uint8_t *p = buf + (r->addr - base);
        uint32_t i = r->who;
        if (h->phase == 0) {
            header(h, i, p);
        } else {
            int32_t s = match(h, p, h->base[i] - h->stack[i]);
            if (s >= 0) {
                h->state[i] = h->pend[i];
                h->shape[i] = s;
            }
        }
        done++;
    }
    return done;
}

/* The next waiting request's address and length (0 when none is). */
int threadc_peek(const threadc_t *h, uint64_t *addr_len)
{
    if (h->head >= h->nreq)
        return 0;
    addr_len[0] = h->req[h->head].addr;
    addr_len[1] = h->req[h->head].len;
    return 1;
}

/* Pass over the next waiting request (it could not be read). */
void threadc_skip(threadc_t *h)
{
    if (h->head < h->nreq)
        h->head++;
}
