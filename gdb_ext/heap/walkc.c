/* lgcstat's heap walk (gcstat.HeapWalker) in C: the same objects, sizes,
 * counts, checks and errors as its Python loops, at tens of nanoseconds an
 * object instead of about a microsecond.
 *
 * The code reads no memory itself.  When an object lies outside the
 * window it holds, it looks the object's page up in its own table of the
 * pieces the Heap's page cache handed it (1 MB, 64 KB and 4 KB pieces, as
 * gdb_ext/vm/pages.py reads them), and asks Python (locate) only for a
 * piece it was never given.  Python keeps every piece it hands over alive
 * until it tells the code to forget them all (a return of 1), so the walk's
 * memory stays within the page cache's bound.  Sizes that need the FFI's
 * ctype table or a string.buffer's own pointers are asked of Python too.
 *
 * Sizes are those of the free functions (R lj_tab.c lj_tab_free, lj_func.c,
 * lj_str.h lj_str_size, lj_state.c lj_state_free, lj_cdata.c,
 * lj_udata.c, lj_trace.c lj_trace_free): gcstat.py's docstring has them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint32_t off, size; } fld_t;

struct walkc_layout {
    uint32_t need, str_need, str_rounded, has_trace, cd_var_flag;
    uint32_t sz_tab, sz_node, sz_fnL0, sz_fnC0, sz_str, sz_L, sz_uv, sz_ud, sz_tr;
    uint32_t snap_size, pt_size, ref_size, udtype_buffer, sbufext_size;
    uint32_t type_need[16];      /* bytes an object of each type must have */
    fld_t nextgc, marked, gct, b1, b2, tab_asize, tab_hmask, fnl_pc, str_len, th_openupval,
        th_stacksize, pt_sizept, ud_udtype, ud_len, cd_ctypeid, tr_nsnap, tr_nins, tr_nk,
        tr_nsnapmap, tr_startpt;
};

/* Python's side: 0 done, 1 done and every earlier piece forgotten, -1 an
 * exception (kept by Python). */
typedef int (*locate_fn)(uint64_t addr, uint32_t need, uint64_t *out);
typedef int64_t (*size_fn)(uint64_t what);          /* -1: an exception */
typedef int (*read_fn)(uint64_t addr, uint32_t n, uint8_t *dst);
typedef int (*progress_fn)(uint64_t n);

enum { E_NONE, E_PY, E_CYCLE, E_BOUND, E_TYPE, E_NOTGC, E_SHORT, E_OOM };
enum { GCT_STR = 4, GCT_UPVAL, GCT_THREAD, GCT_PROTO, GCT_FUNC, GCT_TRACE, GCT_CDATA, GCT_TAB,
       GCT_UDATA };
#define NT 16
#define BIG ((1u << 27) - 1)         /* meta's size field: look in the big list */

typedef struct { uint64_t key; const uint8_t *ptr; uint64_t len; } piece_t;
typedef struct { uint64_t sz, o, gct; } top_t;
typedef struct { uint64_t pt, bytes, count; } chunk_t;

typedef struct {
    struct walkc_layout L;
    locate_fn locate;
    size_fn ctsize, ubuf;
    read_fn read;
    progress_fn progress;
    uint64_t every, bound;
    uint8_t deadmask;
    /* the pieces handed over, by base | level (1: 1 MB, 2: 64 KB, 3: 4 KB) */
    piece_t *tab;
    uint64_t tcap, tcount;
    uint64_t wbase, wend;
    const uint8_t *wbuf;
    /* this call's counts by type (taken and cleared by walkc_take) */
    uint64_t cnt[NT], tot[NT], mn[NT], mx[NT], dcnt[NT], dtot[NT];
    uint64_t n;                  /* objects walked by every call */
    /* keep: every object's address and dead << 31 | gct << 27 | size */
    int keep;
    uint64_t *addrs, kn, kcap;
    uint32_t *meta;
    uint64_t *big, nbig, bigcap; /* (address, size) of sizes >= BIG */
    /* the top_n largest: a min-heap in the order of Python's tuples */
    top_t *top;
    uint64_t top_n, ntop;
    int by_chunk;
    chunk_t *chunks;
    uint64_t ccap, ccount;
    uint64_t *threads, nthreads, thcap;   /* (address, openupval) */
    int64_t ctsz[65536];                  /* ctype id -> a cdata's size (-1: not asked) */
    uint64_t *pend, npend, pcap;          /* string chains' next strings (waves) */
    int err;
    uint64_t err_addr, err_gct;
} walkc_t;

static void *grow(void *p, uint64_t *cap, uint64_t need, size_t each, int *err)
{
    if (need <= *cap)
        return p;
    uint64_t c = *cap ? *cap : 1024;
    while (c < need)
        c += c / 2;
    void *q = realloc(p, c * each);
    if (!q) {
        *err = E_OOM;
        return NULL;
    }
    *cap = c;
    return q;
}

static inline uint64_t get(const uint8_t *p, fld_t f)
{
    switch (f.size) {
    case 1: return p[f.off];
    case 2: { uint16_t v; memcpy(&v, p + f.off, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p + f.off, 4); return v; }
    default: { uint64_t v; memcpy(&v, p + f.off, 8); return v; }
    }
}

walkc_t *walkc_new(const struct walkc_layout *L, uint64_t bound, uint64_t every, uint8_t deadmask,
                   int keep, uint64_t top_n, int by_chunk, locate_fn locate, size_fn ctsize,
                   size_fn ubuf, read_fn read, progress_fn progress)
{
    walkc_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->L = *L;
    h->bound = bound;
    h->every = every ? every : 200000;
    h->deadmask = deadmask;
    h->keep = keep;
    h->top_n = top_n;
    h->by_chunk = by_chunk;
    h->locate = locate;
    h->ctsize = ctsize;
    h->ubuf = ubuf;
    h->read = read;
    h->progress = progress;
    h->wbase = 1;
    memset(h->ctsz, 0xff, sizeof h->ctsz);
    for (int g = 0; g < NT; g++)
        h->mn[g] = (uint64_t)1 << 62;
    if (top_n && !(h->top = malloc(top_n * sizeof *h->top))) {
        free(h);
        return NULL;
    }
    return h;
}

void walkc_free(walkc_t *h)
{
    if (!h)
        return;
    free(h->tab);
    free(h->addrs);
    free(h->meta);
    free(h->big);
    free(h->top);
    free(h->chunks);
    free(h->threads);
    free(h->pend);
    free(h);
}

/* ---- the pieces of memory ------------------------------------------- */
static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    return k ^ (k >> 32);
}

static piece_t *find(const walkc_t *h, uint64_t key)
{
    if (!h->tcap)
        return NULL;
    for (uint64_t i = mix(key) & (h->tcap - 1);; i = (i + 1) & (h->tcap - 1)) {
        if (h->tab[i].key == key)
            return &h->tab[i];
        if (!h->tab[i].key)
            return NULL;
    }
}

static void insert(walkc_t *h, uint64_t key, const uint8_t *ptr, uint64_t len)
{
    if ((h->tcount + 1) * 2 > h->tcap) {
        uint64_t cap = h->tcap ? h->tcap * 2 : 4096;
        piece_t *t = calloc(cap, sizeof *t), *old = h->tab;
        if (!t)
            return;             /* (a piece not remembered is asked for again) */
        h->tab = t;
        uint64_t ocap = h->tcap;
        h->tcap = cap;
        h->tcount = 0;
        for (uint64_t i = 0; i < ocap; i++)
            if (old[i].key)
                insert(h, old[i].key, old[i].ptr, old[i].len);
        free(old);
    }
    uint64_t i = mix(key) & (h->tcap - 1);
    while (h->tab[i].key && h->tab[i].key != key)
        i = (i + 1) & (h->tcap - 1);
    if (!h->tab[i].key)
        h->tcount++;
    h->tab[i] = (piece_t){key, ptr, len};
}

static const uint64_t LEVEL[4] = {0, 1 << 20, 1 << 16, 1 << 12};

/* The piece handed over that holds [o, o + need) (its base: the key less
 * the level in its low bits), or NULL. */
static inline const piece_t *held(const walkc_t *h, uint64_t o, uint64_t need)
{
    for (int lv = 1; lv <= 3; lv++) {
        uint64_t base = o & ~(LEVEL[lv] - 1);
        const piece_t *p = find(h, base | lv);
        if (p && o - base <= p->len && p->len - (o - base) >= need)
            return p;
    }
    return NULL;
}

/* Make [o, o + need) the window; what the window holds may be shorter when
 * the object ends a mapping (then the caller checks its own length). */
static int window(walkc_t *h, uint64_t o, uint32_t need)
{
    const piece_t *p = held(h, o, need);
    if (p) {
        h->wbase = p->key & ~(uint64_t)3;
        h->wbuf = p->ptr;
        h->wend = h->wbase + p->len;
        return 0;
    }
    uint64_t out[3];
    int rc = h->locate(o, need, out);
    if (rc < 0) {
        h->err = E_PY;
        return -1;
    }
    if (rc == 1) {
        if (h->tab)
            memset(h->tab, 0, h->tcap * sizeof *h->tab);
        h->tcount = 0;
    }
    h->wbase = out[0];
    h->wbuf = (const uint8_t *)(uintptr_t)out[1];
    h->wend = out[0] + out[2];
    for (int lv = 1; lv <= 3; lv++)
        if (out[2] == LEVEL[lv] && !(out[0] & (LEVEL[lv] - 1)))
            insert(h, out[0] | lv, h->wbuf, out[2]);
    return 0;
}

/* Ask the processor for the object at o ahead of its turn, when a piece
   handed over holds it: the string table's chains are short and lie
   anywhere, so a walk of one chain after another waits on a cache miss
   (and, in a virtual machine, a slow TLB miss) at each; asked for
   PREFETCH chains ahead, those misses overlap. */
#define PREFETCH 32
static inline void prefetch(const walkc_t *h, uint64_t o)
{
    const piece_t *p = held(h, o, 1);
    if (p)
        __builtin_prefetch(p->ptr + (o - (p->key & ~(uint64_t)3)));
}

/* Whether the window holds [o, o + n) (an address near 2^64 does not:
   no sum here wraps). */
static inline int holds(const walkc_t *h, uint64_t o, uint64_t n)
{
    return o >= h->wbase && o < h->wend && h->wend - o >= n;
}

/* ---- what is kept of each object ------------------------------------ */
static int keep(walkc_t *h, uint64_t o, uint64_t sz, int gct, int dead)
{
    if (h->kn == h->kcap) {
        uint64_t cap = h->kcap ? h->kcap + h->kcap / 2 : 1 << 16;
        uint64_t *a = realloc(h->addrs, cap * sizeof *a);
        if (a)
            h->addrs = a;
        uint32_t *m = a ? realloc(h->meta, cap * sizeof *m) : NULL;
        if (!m) {
            h->err = E_OOM;
            return -1;
        }
        h->meta = m;
        h->kcap = cap;
    }
    if (sz >= BIG) {
        h->big = grow(h->big, &h->bigcap, 2 * h->nbig + 2, sizeof *h->big, &h->err);
        if (!h->big)
            return -1;
        h->big[2 * h->nbig] = o;
        h->big[2 * h->nbig + 1] = sz;
        h->nbig++;
        sz = BIG;
    }
    h->addrs[h->kn] = o;
    h->meta[h->kn++] = (uint32_t)dead << 31 | (uint32_t)gct << 27 | (uint32_t)sz;
    return 0;
}

static inline int top_less(const top_t *a, const top_t *b)
{
    if (a->sz != b->sz)
        return a->sz < b->sz;
    if (a->o != b->o)
        return a->o < b->o;
    return a->gct < b->gct;
}

static void top_sift(walkc_t *h, uint64_t i)
{
    top_t *t = h->top;
    for (;;) {
        uint64_t l = 2 * i + 1, m = i;
        if (l < h->ntop && top_less(&t[l], &t[m]))
            m = l;
        if (l + 1 < h->ntop && top_less(&t[l + 1], &t[m]))
            m = l + 1;
        if (m == i)
            return;
        top_t x = t[i];
        t[i] = t[m];
        t[m] = x;
        i = m;
    }
}

/* As heapq.heappush / heapreplace on (size, address, type) tuples. */
static void top_add(walkc_t *h, uint64_t sz, uint64_t o, int gct)
{
    top_t e = {sz, o, (uint64_t)gct}, *t = h->top;
    if (h->ntop < h->top_n) {
        uint64_t i = h->ntop++;
        while (i && top_less(&e, &t[(i - 1) / 2])) {
            t[i] = t[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        t[i] = e;
    } else {
        t[0] = e;
        top_sift(h, 0);
    }
}

static int chunk_add(walkc_t *h, uint64_t pt, uint64_t sz)
{
    if ((h->ccount + 1) * 2 > h->ccap) {
        uint64_t cap = h->ccap ? h->ccap * 2 : 1024;
        chunk_t *t = calloc(cap, sizeof *t), *old = h->chunks;
        if (!t) {
            h->err = E_OOM;
            return -1;
        }
        for (uint64_t i = 0; i < h->ccap; i++)
            if (old[i].count) {
                uint64_t j = mix(old[i].pt) & (cap - 1);
                while (t[j].count)
                    j = (j + 1) & (cap - 1);
                t[j] = old[i];
            }
        free(old);
        h->chunks = t;
        h->ccap = cap;
    }
    uint64_t j = mix(pt) & (h->ccap - 1);
    while (h->chunks[j].count && h->chunks[j].pt != pt)
        j = (j + 1) & (h->ccap - 1);
    if (!h->chunks[j].count) {
        h->chunks[j].pt = pt;
        h->ccount++;
    }
    h->chunks[j].bytes += sz;
    h->chunks[j].count++;
    return 0;
}

/* ---- sizes ----------------------------------------------------------- */
static int fail(walkc_t *h, int err, uint64_t o, uint64_t gct)
{
    h->err = err;
    h->err_addr = o;
    h->err_gct = gct;
    return -1;
}

/* The size of the object at o (p: its bytes), or -1 with h->err set. */
static int64_t size_of(walkc_t *h, uint64_t o, const uint8_t *p, int gct, int b1, int b2,
                       int marked)
{
    const struct walkc_layout *L = &h->L;
    uint64_t sz;
    switch (gct) {
    case GCT_TAB: {
        uint64_t asize = get(p, L->tab_asize), hmask = get(p, L->tab_hmask);
        sz = L->sz_tab;
        if (b2) {
            sz += (uint64_t)(b2 & 0x7f) << 3;
            if (asize && (b2 & 0x80))
                sz += asize << 3;
        } else if (asize) {
            sz += asize << 3;
        }
        if (hmask)
            sz += (hmask + 1) * L->sz_node;
        return (int64_t)sz;
    }
    case GCT_STR: {
        uint64_t ln = get(p, L->str_len);
        return (int64_t)(L->sz_str + (L->str_rounded ? ((ln + 4) & ~(uint64_t)3) : ln + 1));
    }
    case GCT_FUNC:
        if (b1 == 0) {
            sz = L->sz_fnL0 + (uint64_t)b2 * L->ref_size;
            if (h->by_chunk && chunk_add(h, get(p, L->fnl_pc) - L->pt_size, sz))
                return -1;
            return (int64_t)sz;
        }
        return (int64_t)(L->sz_fnC0 + (uint64_t)b2 * 8);
    case GCT_UPVAL:
        return L->sz_uv;
    case GCT_THREAD: {
        h->threads = grow(h->threads, &h->thcap, 2 * h->nthreads + 2, sizeof *h->threads,
                          &h->err);
        if (!h->threads)
            return -1;
        h->threads[2 * h->nthreads] = o;
        h->threads[2 * h->nthreads + 1] = get(p, L->th_openupval);
        h->nthreads++;
        return (int64_t)(L->sz_L + get(p, L->th_stacksize) * 8);
    }
    case GCT_PROTO:
        sz = get(p, L->pt_sizept);
        if (h->by_chunk && chunk_add(h, o, sz))
            return -1;
        return (int64_t)sz;
    case GCT_CDATA: {
        uint64_t id = get(p, L->cd_ctypeid);
        if (marked & L->cd_var_flag) {
            /* GCcdataVar {uint16 offset, uint16 extra, MSize len} below it */
            uint8_t var[8];
            if (h->read(o - 8, 8, var) < 0) {
                h->err = E_PY;
                return -1;
            }
            uint16_t extra;
            uint32_t len;
            memcpy(&extra, var + 2, 2);
            memcpy(&len, var + 4, 4);
            return (int64_t)len + extra;
        }
        if (id < 65536 && h->ctsz[id] >= 0)
            return h->ctsz[id];
        int64_t s = h->ctsize(id);
        if (s < 0) {
            h->err = E_PY;
            return -1;
        }
        if (id < 65536)
            h->ctsz[id] = s;
        return s;
    }
    case GCT_UDATA: {
        uint64_t udtype = get(p, L->ud_udtype), ln = get(p, L->ud_len);
        sz = L->sz_ud + ln;
        if (udtype == L->udtype_buffer && L->sbufext_size && ln >= L->sbufext_size) {
            int64_t b = h->ubuf(o);
            if (b < 0) {
                h->err = E_PY;
                return -1;
            }
            sz += (uint64_t)b;
        }
        return (int64_t)sz;
    }
    case GCT_TRACE:
        if (L->has_trace) {
            uint64_t nins = get(p, L->tr_nins), nk = get(p, L->tr_nk);
            sz = L->sz_tr + ((nins - nk) & 0xFFFFFFFFu) * 8 +
                get(p, L->tr_nsnap) * L->snap_size + get(p, L->tr_nsnapmap) * 4;
            if (h->by_chunk && chunk_add(h, get(p, L->tr_startpt), sz))
                return -1;
            return (int64_t)sz;
        }
        /* fall through */
    default:
        return fail(h, E_NOTGC, o, (uint64_t)gct);
    }
}

/* ---- the walks ------------------------------------------------------- */
/* Count one object; 0, or -1 with h->err set. */
static inline int count(walkc_t *h, uint64_t o, uint64_t sz, int gct, int marked)
{
    int dead = (marked & h->deadmask) != 0;
    h->cnt[gct]++;
    h->tot[gct] += sz;
    if (sz < h->mn[gct])
        h->mn[gct] = sz;
    if (sz > h->mx[gct])
        h->mx[gct] = sz;
    if (dead) {
        h->dcnt[gct]++;
        h->dtot[gct] += sz;
    }
    if (h->keep && keep(h, o, sz, gct, dead))
        return -1;
    if (h->top_n && sz > (h->ntop < h->top_n ? 0 : h->top[0].sz))
        top_add(h, sz, o, gct);
    return 0;
}

/* Brent's cycle check, the bound and the progress calls, as _walk has
 * them: their state for one call. */
typedef struct { uint64_t start_n, next_check, next_progress, mark, seg, mark_at; } pace_t;

static void chain_start(walkc_t *h, pace_t *c)
{
    c->mark = 0;
    c->seg = 64;
    c->mark_at = h->n + 64;
    if (c->next_check > c->mark_at)
        c->next_check = c->mark_at;
}

static int paced(walkc_t *h, pace_t *c, uint64_t o)
{
    if (h->n >= c->mark_at) {
        c->seg *= 2;
        c->mark = o;
        c->mark_at = h->n + c->seg;
    }
    if (h->n >= c->next_progress) {
        if (h->n - c->start_n > h->bound)
            return fail(h, E_BOUND, o, 0);
        c->next_progress = h->n + h->every;
        if (h->progress && h->progress(h->n) < 0) {
            h->err = E_PY;
            return -1;
        }
    }
    c->next_check = c->next_progress < c->mark_at ? c->next_progress : c->mark_at;
    return 0;
}

/* The nextgc chain from each address in starts until NULL (or until the
 * object stop_after, included); only: the type each must have (-1: any).
 * strings: string chains (the type checked first, as _walk_str does);
 * one_step: the first object of each chain only, its successor kept for
 * walkc_wave.  The objects walked, or -1 with the error in walkc_error. */
static int64_t walk_chains(walkc_t *h, const uint64_t *starts, uint64_t nstarts, int only,
                           uint64_t stop_after, int strings, int one_step)
{
    const struct walkc_layout *L = &h->L;
    uint64_t need = strings ? L->str_need : L->need;
    pace_t c = {h->n, h->n + h->every, h->n + h->every, 0, 0, 0};
    h->err = E_NONE;
    for (uint64_t s = 0; s < nstarts; s++) {
        uint64_t o = starts[s];
        if (s + PREFETCH < nstarts)
            prefetch(h, starts[s + PREFETCH]);
        chain_start(h, &c);
        while (o) {
            if (o == c.mark)
                return fail(h, E_CYCLE, o, 0);
            if (!holds(h, o, need)) {
                if (window(h, o, (uint32_t)need))
                    return -1;
                if (!holds(h, o, L->b2.off + 1))
                    return fail(h, E_SHORT, o, 0);
            }
            const uint8_t *p = h->wbuf + (o - h->wbase);
            uint64_t nxt = get(p, L->nextgc);
            int marked = p[L->marked.off], gct = p[L->gct.off];
            int b1 = p[L->b1.off], b2 = p[L->b2.off];
            if (strings && gct != GCT_STR)
                return fail(h, E_TYPE, o, (uint64_t)gct);
            if (!holds(h, o, need) && !holds(h, o, L->type_need[gct & (NT - 1)]))
                return fail(h, E_SHORT, o, (uint64_t)gct);
            int64_t sz = size_of(h, o, p, gct, b1, b2, marked);
            if (sz < 0)
                return -1;
            if (only >= 0 && gct != only)
                return fail(h, E_TYPE, o, (uint64_t)gct);
            if (count(h, o, (uint64_t)sz, gct, marked))
                return -1;
            h->n++;
            if (h->n >= c.next_check && paced(h, &c, o))
                return -1;
            if (one_step) {
                if (nxt) {
                    h->pend = grow(h->pend, &h->pcap, h->npend + 1, sizeof *h->pend, &h->err);
                    if (!h->pend)
                        return -1;
                    h->pend[h->npend++] = nxt;
                }
                break;
            }
            if (o == stop_after)
                break;
            o = nxt;
        }
    }
    return (int64_t)(h->n - c.start_n);
}

int64_t walkc_walk(walkc_t *h, const uint64_t *starts, uint64_t nstarts, int only,
                   uint64_t stop_after)
{
    return walk_chains(h, starts, nstarts, only, stop_after, 0, 0);
}

static int64_t walk_str(walkc_t *h, const uint64_t *starts, uint64_t nstarts, int one_step)
{
    return walk_chains(h, starts, nstarts, GCT_STR, 0, 1, one_step);
}

/* The string table's slots (count anchors of rs bytes each; bit 0 is the
 * secondary-hash flag): walked now, or (waves) kept for walkc_waves. */
int64_t walkc_strings(walkc_t *h, const uint8_t *slots, uint64_t count, uint32_t rs, int waves)
{
    uint64_t *heads = malloc((count ? count : 1) * sizeof *heads), m = 0;
    if (!heads)
        return fail(h, E_OOM, 0, 0);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t a = 0;
        memcpy(&a, slots + i * rs, rs);
        a &= ~(uint64_t)1;
        if (a)
            heads[m++] = a;
    }
    int64_t r;
    if (waves) {
        h->err = E_NONE;
        h->pend = grow(h->pend, &h->pcap, h->npend + m, sizeof *h->pend, &h->err);
        if (h->pend) {
            memcpy(h->pend + h->npend, heads, m * sizeof *heads);
            h->npend += m;
        }
        r = h->pend ? 0 : -1;
    } else {
        r = walk_str(h, heads, m, 0);
    }
    free(heads);
    return r;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* One wave over the strings kept: each chain's next string in address
 * order (so that pages are read in order).  The strings still waiting,
 * or -1 with the error set. */
int64_t walkc_wave(walkc_t *h)
{
    uint64_t n = h->npend;
    uint64_t *wave = h->pend;
    h->pend = NULL;
    h->npend = h->pcap = 0;
    qsort(wave, n, sizeof *wave, by_value);
    int64_t r = walk_str(h, wave, n, 1);
    free(wave);
    return r < 0 ? -1 : (int64_t)h->npend;
}

/* ---- results --------------------------------------------------------- */
/* This call's counts by type (six rows of NT), cleared after. */
void walkc_take(walkc_t *h, uint64_t *out)
{
    uint64_t *rows[6] = {h->cnt, h->tot, h->mn, h->mx, h->dcnt, h->dtot};
    for (int r = 0; r < 6; r++)
        memcpy(out + r * NT, rows[r], NT * sizeof(uint64_t));
    memset(h->cnt, 0, sizeof h->cnt);
    memset(h->tot, 0, sizeof h->tot);
    memset(h->mx, 0, sizeof h->mx);
    memset(h->dcnt, 0, sizeof h->dcnt);
    memset(h->dtot, 0, sizeof h->dtot);
    for (int g = 0; g < NT; g++)
        h->mn[g] = (uint64_t)1 << 62;
}

/* err, its address, its type byte, objects walked. */
void walkc_error(const walkc_t *h, uint64_t *out)
{
    out[0] = (uint64_t)h->err;
    out[1] = h->err_addr;
    out[2] = h->err_gct;
    out[3] = h->n;
}

uint64_t walkc_threads(const walkc_t *h, const uint64_t **out)
{
    *out = h->threads;
    return h->nthreads;
}

uint64_t walkc_pending(const walkc_t *h, const uint64_t **out)
{
    *out = h->pend;
    return h->npend;
}

uint64_t walkc_top(const walkc_t *h, const uint64_t **out)
{
    *out = (const uint64_t *)h->top;
    return h->ntop;
}

/* The chunks' (prototype, bytes, objects), compacted in place. */
uint64_t walkc_chunks(walkc_t *h, const uint64_t **out)
{
    uint64_t m = 0;
    for (uint64_t i = 0; i < h->ccap; i++)
        if (h->chunks[i].count)
            h->chunks[m++] = h->chunks[i];
    h->ccap = 0;                  /* (no more adding after this) */
    *out = (const uint64_t *)h->chunks;
    return m;
}

/* The number of objects kept. */
uint64_t walkc_kept(const walkc_t *h)
{
    return h->kn;
}

/* The kept objects sorted by address into the caller's arrays (walkc_kept
 * entries each): address, type, size and dead mark; the kept arrays are
 * freed.  A radix sort of the address less the lowest, from bit 3 up to
 * the highest that differs, in passes of at most 8 bits (a pass over 256
 * buckets keeps its writes in the cache; 15 bits at a time over 32768
 * took twice as long at 10^7 objects).  Its second buffer is the caller's
 * arrays (addresses, and the first half of sizes for the words), so no
 * memory is had for it: the passes start from whichever side makes them
 * end there.  The words are then spread into sizes from the last down,
 * each 8-byte size written over words already read. */
void walkc_sort_into(walkc_t *h, uint64_t *addrs, uint8_t *gcts, uint64_t *sizes, uint8_t *dead)
{
    uint64_t n = h->kn, cnt[256];
    uint64_t *a = h->addrs, *a2 = addrs;
    uint32_t *m = h->meta, *m2 = (uint32_t *)sizes;
    int sorted = 1;
    uint64_t lo = n ? a[0] : 0, hi = lo;
    for (uint64_t i = 1; i < n; i++) {
        sorted &= a[i - 1] <= a[i];
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
    }
    int bits = 0;
    while (bits < 61 && ((hi - lo) >> 3 >> bits))
        bits++;
    int passes = sorted ? 0 : (bits + 7) / 8;
    int digit = passes ? (bits + passes - 1) / passes : 0;
    uint64_t mask = (1ull << digit) - 1;
    if (passes % 2 == 0) {          /* (an even number of passes: start there) */
        if (n) {
            memcpy(a2, a, n * sizeof *a);
            memcpy(m2, m, n * sizeof *m);
        }
        a2 = a, m2 = m;
        a = addrs, m = (uint32_t *)sizes;
    }
    for (int pass = 0; pass < passes; pass++) {
        int shift = 3 + digit * pass;
        memset(cnt, 0, sizeof cnt);
        for (uint64_t i = 0; i < n; i++)
            cnt[((a[i] - lo) >> shift) & mask]++;
        uint64_t sum = 0;
        for (uint64_t d = 0; d <= mask; d++) {
            uint64_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t j = cnt[((a[i] - lo) >> shift) & mask]++;
            a2[j] = a[i];
            m2[j] = m[i];
        }
        uint64_t *ta = a;
        uint32_t *tm = m;
        a = a2, m = m2, a2 = ta, m2 = tm;
    }
    /* (now a == addrs and m is the start of sizes) */
    if (h->nbig)
        qsort(h->big, h->nbig, 2 * sizeof *h->big, by_value);
    uint64_t b = h->nbig;
    for (uint64_t i = n; i-- > 0;) {
        uint32_t w = m[i];
        uint64_t sz = w & BIG;
        gcts[i] = (w >> 27) & 15;
        dead[i] = w >> 31;
        if (sz == BIG) {
            while (b > 0 && h->big[2 * (b - 1)] > addrs[i])
                b--;
            if (b > 0 && h->big[2 * (b - 1)] == addrs[i])
                sz = h->big[2 * (b - 1) + 1];
        }
        sizes[i] = sz;
    }
    free(h->addrs);
    free(h->meta);
    h->addrs = NULL;
    h->meta = NULL;
    h->kn = h->kcap = 0;
}
