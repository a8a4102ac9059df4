/* The heap graph's references and dominator tree in C (graphc.py drives it).

   Python hands over the walk's objects (sorted addresses, types, sizes) and
   the Layout's offsets.  The bytes each object's references need are then
   asked for as requests: graphc_plan() sorts those still waiting by address
   and groups them into runs, and Python reads the process's memory a run
   at a time (one read for many neighbouring objects) and passes each run to
   graphc_feed(),
   which decodes every waiting request the run holds.  First the objects
   themselves (a table's header, a function, an upvalue); then what those
   point to (a table's array and hash part, an open upvalue's stack slot).
   Nothing here reads memory on its own, so one code serves gdb, lldb, the
   core reader and --pid alike.  Memory the caller holds in place (a
   core's segments, mapped by the core reader; the pages the walk's page
   cache copied, in gdb, lldb and --pid) is handed over at the start, and a
   request inside it is decoded as it is made, with no plan or read.

   The references kept are heapgraph.Heap.graph_targets's, in its order:
   a table's metatable, its array slots, its hash part's values, then its
   keys whose value is not nil (weak halves left out, as the __mode of its
   metatable says: graphc_set_weak); a Lua function's environment,
   prototype and upvalue objects; a C function's environment and upvalue
   values; an upvalue's value.  Other objects' references come from Python
   (graphc_add).  A target that is no object of the walk is dropped, and an
   object's repeated targets count once.

   graphc_dominators() then numbers the objects in breadth-first order
   from the roots and finds the immediate dominators and retained sizes
   exactly as heapdom.Dominators does in Python (Cooper, Harvey and
   Kennedy's iteration; see heapdom.py), over the references in CSR form. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { K_TAB = 1, K_FUNC, K_UPVAL, K_ARR, K_NODE, K_UVVAL, K_STR, K_THREAD, K_STACK };
enum { GCT_STR = 4, GCT_UPVAL = 5, GCT_THREAD = 6, GCT_FUNC = 8, GCT_TAB = 11 };
#define ARR_PIECE 65536u
#define NODE_PIECE 16384u

struct graphc_layout {
    uint32_t rs, ms, gc64, nil_shift;
    uint64_t nil_top;
    uint32_t tab_size, tab_mt, tab_asize, tab_hmask, tab_array, tab_node;
    uint32_t node_size, node_key, node_val;
    uint32_t fn_ffid, fn_nup, fn_env, fnl_pc, fnl_uvptr, fnc_upvalue, pt_size;
    uint32_t uv_size, uv_v;
    uint32_t str_len, str_size;
    uint32_t th_size, th_env, th_stack, th_top, ps;
};

/* A request as kept (16 bytes): the address in the low 48 bits of w, the
   kind in its top 4 and aux (an upvalue's index + 1, a table's weak mode)
   in the 12 between; and as decoded. */
typedef struct { uint64_t w; uint32_t len, owner; } req_t;
typedef struct { uint64_t addr; uint32_t len, owner, aux, kind; } rq_t;
#define ADDR_BITS 48
#define ADDR_OF(r) ((r)->w & ((1ull << ADDR_BITS) - 1))
typedef struct { uint32_t owner; uint32_t asize, hmask; uint64_t mt, arr, node; } tab_t;
/* Memory the caller holds in place (a core's mapped segment, a page the
   page cache copied): [lo, hi) is at p. */
typedef struct { uint64_t lo, hi; const uint8_t *p; } inplace_t;
/* The heap snapshot's names Python gives (graphc_snap_pending): each
   distinct (class, key, sub) once, and what waits for it (a node or an
   edge by index) with the distinct one's number. */
typedef struct { uint64_t key; uint32_t sub, cls; } dkey_t;
typedef struct { uint32_t what, id; } pend_t;

typedef struct {
    struct graphc_layout L;
    uint64_t n;
    const uint64_t *addrs;
    const uint8_t *gcts;
    const uint64_t *sizes;
    req_t *req; uint64_t nreq, capreq, head;
    const inplace_t *inplace; uint64_t ninplace;   /* memory held in place, sorted */
    uint64_t ip_last;                               /* ... the piece in_place found last */
    int kept_any; uint32_t kept_owner;              /* the last request kept: whose */
    uint64_t *runs, planned;
    tab_t *tabs; uint64_t ntabs, captabs;
    uint64_t *mts; uint64_t nmts;
    uint32_t *esrc, *edst; uint64_t nedge, capedge;   /* esrc: owner | part << 30 */
    int strong;          /* a Lua function's upvalues are their values (lgcpath's view) */
    uint32_t *ekey;      /* strong: the order within a part (an upvalue's index + 1) */
    int64_t find;        /* >= 0: no references kept, only their holders marked */
    uint8_t *found;      /* ... in found[holder] when the target is this index */
    uint32_t *off, *dst; uint64_t ndst;
    uint64_t norder;
    struct { uint64_t chunk, base; } *chunks; uint64_t chunk_mask; unsigned chunk_shift;
    uint32_t *dir;
    uint64_t references, passes;
    int oom;
    /* The heap snapshot (named: see "The heap snapshot" below). */
    int named, strings;
    uint32_t *ename; uint8_t *etype;
    uint32_t *names, *strrank, fixed[5];
    dkey_t *dk; uint64_t ndk, capdk; uint32_t *dslot; uint64_t dmask;
    pend_t *pend; uint64_t npend, cappend;
    uint32_t *wtabs; uint64_t nwtabs, capwtabs;
    uint8_t *ety;
    int fd, werr; char *obuf; uint64_t olen;
    uint32_t max_string;
} graphc_t;

static int decode_named(graphc_t *h, const rq_t *q, const uint8_t *p);
static void string_missing(graphc_t *h);

static void *grow(void *p, uint64_t *cap, uint64_t need, size_t each, int *oom)
{
    if (need <= *cap)
        return p;
    uint64_t c = *cap ? *cap : 1024;
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

static int decode(graphc_t *h, const rq_t *q, const uint8_t *p);

/* Where memory held in place has [addr, addr + len), or NULL.  The piece
   of the last answer is tried first: requests come in address order, and
   a table's parts mostly lie near it. */
static const uint8_t *in_place(graphc_t *h, uint64_t addr, uint32_t len)
{
    if (!h->ninplace)
        return NULL;
    const inplace_t *c = &h->inplace[h->ip_last];
    if (c->lo <= addr && addr + len <= c->hi)
        return c->p + (addr - c->lo);
    uint64_t lo = 0, hi = h->ninplace;
    while (lo < hi) {               /* the first that ends after addr */
        uint64_t mid = (lo + hi) >> 1;
        if (h->inplace[mid].hi <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == h->ninplace)
        return NULL;
    const inplace_t *m = &h->inplace[lo];
    if (m->lo > addr || addr + len > m->hi)
        return NULL;
    h->ip_last = lo;
    return m->p + (addr - m->lo);
}

/* A request of the bytes [addr, addr + len): decoded at once when they are
   held in place, else kept until it is planned and fed.  The references
   of one object's part must come in their order: its pieces are asked for
   one after another in address order, and the kept ones are decoded in
   address order, so once a piece of an object is kept, so are the rest of
   its pieces.  A string's text goes to the file in node order: once one
   is kept, so are all after it. */
static int add_req(graphc_t *h, uint64_t addr, uint32_t len, uint32_t owner, uint8_t kind,
                   uint32_t aux)
{
    if (addr >> ADDR_BITS || addr + len < addr)
        return 0;                   /* no user-space address: nothing to read */
    int free_to = kind == K_STR ? h->head == h->nreq
                                : !(h->kept_any && h->kept_owner == owner);
    if (h->ninplace && free_to) {
        const uint8_t *p = in_place(h, addr, len);
        if (p) {
            rq_t q = {addr, len, owner, aux, kind};
            return (h->named ? decode_named : decode)(h, &q, p) ? -1 : 0;
        }
    }
    h->kept_any = 1;
    h->kept_owner = owner;
    req_t *r = grow(h->req, &h->capreq, h->nreq + 1, sizeof(req_t), &h->oom);
    if (!r)
        return -1;
    h->req = r;
    req_t *q = &r[h->nreq++];
    q->w = addr | (uint64_t)aux << ADDR_BITS | (uint64_t)kind << 60;
    q->len = len;
    q->owner = owner;
    return 0;
}

static inline uint64_t gc_of(const graphc_t *h, uint64_t raw)
{
    if (h->L.gc64) {
        uint64_t it = raw >> 47;
        return (it >= 0x1FFF3 && it <= 0x1FFFB) ? raw & ((1ull << 47) - 1) : 0;
    }
    uint64_t it = raw >> 32;
    return (it >= 0xFFFFFFF3ull && it <= 0xFFFFFFFBull) ? raw & 0xFFFFFFFFull : 0;
}

static inline uint64_t get(const uint8_t *p, uint32_t size)
{
    uint64_t v = 0;
    memcpy(&v, p, size);          /* little-endian machines only (x86-64, arm64) */
    return v;
}

/* Where an address is among the objects, kept in their address order so
   that neighbouring targets are looked up in neighbouring memory: the
   objects' addresses are cut into chunks of 1 MB and those into blocks of
   512 bytes.  Each chunk that holds an object's start has DIR_BLOCKS + 1
   words in dir[]: the index of the first object at or after each block's
   start, and after its end; a small hash table (open addressing, at least
   two slots a chunk) finds a chunk's words.  A lookup is one probe of that
   table (it stays in the cache), two words of dir[] and a search of the
   few addresses of one block.  A hash table of the objects themselves
   took 64 MB at 10^7 objects and a cache miss or two a lookup. */
#define CHUNK_SHIFT 20
#define BLOCK_SHIFT 9
#define DIR_BLOCKS (1u << (CHUNK_SHIFT - BLOCK_SHIFT))
#define NO_CHUNK UINT64_MAX

static inline uint64_t chunk_slot(const graphc_t *h, uint64_t c)
{
    return (c * 0x9E3779B97F4A7C15ull) >> h->chunk_shift;
}

static int make_dir(graphc_t *h)
{
    uint64_t n = h->n, nc = 0;
    for (uint64_t i = 0; i < n; i++)
        nc += !i || (h->addrs[i] >> CHUNK_SHIFT) != (h->addrs[i - 1] >> CHUNK_SHIFT);
    unsigned bits = 4;
    while ((1ull << bits) < 2 * nc)
        bits++;
    h->chunk_shift = 64 - bits;
    h->chunk_mask = (1ull << bits) - 1;
    h->chunks = malloc((h->chunk_mask + 1) * sizeof *h->chunks);
    h->dir = malloc((nc ? nc : 1) * (DIR_BLOCKS + 1) * sizeof *h->dir);
    if (!h->chunks || !h->dir)
        return -1;
    for (uint64_t k = 0; k <= h->chunk_mask; k++)
        h->chunks[k].chunk = NO_CHUNK;
    uint64_t i = 0, base = 0;
    while (i < n) {
        uint64_t c = h->addrs[i] >> CHUNK_SHIFT;
        uint64_t k = chunk_slot(h, c);
        while (h->chunks[k].chunk != NO_CHUNK)
            k = (k + 1) & h->chunk_mask;
        h->chunks[k].chunk = c;
        h->chunks[k].base = base;
        uint32_t *d = h->dir + base;
        for (uint32_t b = 0; b <= DIR_BLOCKS; b++) {
            uint64_t start = (c << CHUNK_SHIFT) + ((uint64_t)b << BLOCK_SHIFT);
            while (i < n && h->addrs[i] < start)
                i++;
            d[b] = (uint32_t)i;
        }
        base += DIR_BLOCKS + 1;
    }
    return 0;
}

static void drop_dir(graphc_t *h)
{
    free(h->chunks);
    free(h->dir);
    h->chunks = NULL;
    h->dir = NULL;
}

/* The directory's two words for the block of address a, or NULL when no
   object starts in its chunk. */
static inline const uint32_t *dir_of(const graphc_t *h, uint64_t a)
{
    uint64_t c = a >> CHUNK_SHIFT;
    for (uint64_t k = chunk_slot(h, c);; k = (k + 1) & h->chunk_mask) {
        uint64_t got = h->chunks[k].chunk;
        if (got == NO_CHUNK)
            return NULL;
        if (got == c)
            return h->dir + h->chunks[k].base + ((a >> BLOCK_SHIFT) & (DIR_BLOCKS - 1));
    }
}

static int64_t position(const graphc_t *h, uint64_t a)
{
    const uint32_t *d = dir_of(h, a);
    if (!d)
        return -1;
    uint32_t lo = d[0], hi = d[1];
    while (lo < hi) {
        uint32_t mid = (lo + hi) >> 1;
        if (h->addrs[mid] < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d[1] && h->addrs[lo] == a ? (int64_t)lo : -1;
}

/* A long part's targets lie anywhere in the heap when its table was
   filled in any order (a cache, a registry): each lookup would wait on
   a miss in dir[] and then in addrs[].  So the target AHEAD slots on has
   its directory words asked for, and the one AHEAD / 2 on, whose words
   have come, its addresses: the misses of many lookups overlap. */
#define AHEAD 16

/* The object slot i of a part of cnt slots of `size` bytes holds in its
   TValue at `at`, 0 past the end. */
static inline uint64_t slot_gc(const graphc_t *h, const uint8_t *p, uint32_t i, uint32_t cnt,
                               uint32_t size, uint32_t at)
{
    return i < cnt ? gc_of(h, get(p + (uint64_t)i * size + at, 8)) : 0;
}

/* At slot i of such a part (a long one only): the lookups ahead.  (Kept
   inline: GCC 12 otherwise calls its body out of line at every slot.) */
static inline __attribute__((always_inline)) void part_ahead(const graphc_t *h, const uint8_t *p, uint32_t i, uint32_t cnt,
                              uint32_t size, uint32_t at)
{
    if (cnt <= AHEAD)
        return;
    uint64_t far = slot_gc(h, p, i + AHEAD, cnt, size, at);
    uint64_t near = slot_gc(h, p, i + AHEAD / 2, cnt, size, at);
    const uint32_t *d;
    if (far && (d = dir_of(h, far)) != NULL)
        __builtin_prefetch(d);
    if (near && (d = dir_of(h, near)) != NULL)
        __builtin_prefetch(&h->addrs[d[0]]);
}

/* Room for one more reference (the snapshot's names too); -1 out of memory. */
static int edge_room(graphc_t *h)
{
    if (h->nedge < h->capedge)
        return 0;
    uint64_t cap = h->capedge ? 2 * h->capedge : 1 << 16;
    if (cap > 0xFFFFFFFFull) {
        h->oom = 1;
        return -1;
    }
    uint32_t *s = realloc(h->esrc, cap * 4);
    if (s)
        h->esrc = s;
    uint32_t *d = s ? realloc(h->edst, cap * 4) : NULL;
    if (d)
        h->edst = d;
    if (d && h->strong) {
        uint32_t *k = realloc(h->ekey, cap * 4);
        if (k)
            h->ekey = k;
        d = k ? d : NULL;
    }
    if (d && h->named) {
        uint32_t *nm = realloc(h->ename, cap * 4);
        if (nm)
            h->ename = nm;
        uint8_t *t = nm ? realloc(h->etype, cap) : NULL;
        if (t)
            h->etype = t;
        d = t ? d : NULL;
    }
    if (!d) {
        h->oom = 1;
        return -1;
    }
    h->capedge = cap;
    return 0;
}

static int edge_k(graphc_t *h, uint32_t owner, uint32_t part, uint32_t key, uint64_t target)
{
    if (!target)
        return 0;
    int64_t j = position(h, target);
    if (j < 0)
        return 0;
    if (h->find >= 0) {
        if (j == h->find)
            h->found[owner] = 1;
        return 0;
    }
    if (edge_room(h))
        return -1;
    if (h->strong)
        h->ekey[h->nedge] = key;
    h->esrc[h->nedge] = owner | part << 30;
    h->edst[h->nedge++] = (uint32_t)j;
    return 0;
}

static int edge(graphc_t *h, uint32_t owner, uint32_t part, uint64_t target)
{
    return edge_k(h, owner, part, 0, target);
}

/* strong: a Lua function's upvalues are the values its upvalue objects
   hold (Heap.strong_targets, for lgcpath) rather than the objects
   (graph_targets).  inplace: the memory the caller holds in place (sorted,
   none overlapping, kept alive until graphc_free), whose requests are
   decoded as they are made. */
graphc_t *graphc_new(const struct graphc_layout *L, uint64_t n, const uint64_t *addrs,
                     const uint8_t *gcts, const uint64_t *sizes, int strong,
                     const inplace_t *inplace, uint64_t ninplace)
{
    if (n >= (1u << 30))
        return NULL;
    graphc_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->L = *L;
    h->n = n; h->addrs = addrs; h->gcts = gcts; h->sizes = sizes;
    h->strong = strong;
    h->find = -1;
    h->inplace = inplace;
    h->ninplace = ninplace;
    if (make_dir(h)) {
        drop_dir(h);
        free(h);
        return NULL;
    }
    return h;
}

/* The first requests: the tables', functions' and upvalues' own bytes (in
   address order, the objects'), and with `threads` the threads' (their
   environment and stack slots: heapgraph.Heap._thread's references where
   a frame's function is a slot of its own, LJ_FR2), once the graph is set
   up (graphc_find, graphc_snap_begin).  0, or -1 out of memory. */
int graphc_objects(graphc_t *h, int threads)
{
    const struct graphc_layout *L = &h->L;
    for (uint64_t i = 0; i < h->n && !h->oom; i++) {
        uint8_t g = h->gcts[i];
        uint64_t a = h->addrs[i];
        if (g == GCT_TAB)
            add_req(h, a, L->tab_size, (uint32_t)i, K_TAB, 0);
        else if (g == GCT_FUNC)
            add_req(h, a, (uint32_t)h->sizes[i], (uint32_t)i, K_FUNC, 0);
        else if (g == GCT_UPVAL)
            add_req(h, a, L->uv_size, (uint32_t)i, K_UPVAL, 0);
        else if (g == GCT_THREAD && threads)
            add_req(h, a, L->th_size, (uint32_t)i, K_THREAD, 0);
    }
    return h->oom ? -1 : 0;
}

void graphc_free(graphc_t *h)
{
    if (!h)
        return;
    free(h->req); free(h->runs); free(h->tabs); free(h->mts);
    free(h->esrc); free(h->edst); free(h->ekey); free(h->off); free(h->dst);
    drop_dir(h);
    free(h->ename); free(h->etype); free(h->strrank); free(h->dk); free(h->dslot);
    free(h->pend); free(h->wtabs); free(h->ety); free(h->obuf);
    free(h);
}

int graphc_oom(const graphc_t *h) { return h->oom; }

static int by_addr(const void *a, const void *b)
{
    uint64_t x = ADDR_OF((const req_t *)a), y = ADDR_OF((const req_t *)b);
    return x < y ? -1 : x > y;
}

/* The waiting requests in address order, those of one address in the
   order they were made: none moved when they are in order already (the
   objects' own requests are), else a radix sort of the address's bits 3
   to 47, 15 at a time (qsort, a merge sort in glibc, when its second
   buffer cannot be had). */
static void sort_requests(graphc_t *h)
{
    uint64_t n = h->nreq, k = 1;
    req_t *a = h->req;
    while (k < n && ADDR_OF(&a[k - 1]) <= ADDR_OF(&a[k]))
        k++;
    if (k >= n)
        return;
    req_t *b = malloc(n * sizeof *b);
    uint64_t *cnt = malloc(32768 * sizeof *cnt);
    if (!b || !cnt) {
        free(b);
        free(cnt);
        qsort(a, n, sizeof(req_t), by_addr);
        return;
    }
    for (int shift = 3; shift < ADDR_BITS; shift += 15) {
        memset(cnt, 0, 32768 * sizeof *cnt);
        for (uint64_t i = 0; i < n; i++)
            cnt[(ADDR_OF(&a[i]) >> shift) & 32767]++;
        if (cnt[(ADDR_OF(&a[0]) >> shift) & 32767] == n)
            continue;                   /* one digit for all: nothing moves */
        uint64_t sum = 0;
        for (int d = 0; d < 32768; d++) {
            uint64_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++)
            b[cnt[(ADDR_OF(&a[i]) >> shift) & 32767]++] = a[i];
        req_t *t = a;
        a = b;
        b = t;
    }
    if (a != h->req) {
        /* (the sorted copy becomes the list, of capacity n; b is the old) */
        free(h->req);
        h->req = a;
        h->capreq = n;
    } else {
        free(b);
    }
    free(cnt);
}

/* Sorts the waiting requests by address and groups them into runs, each
   one read: neighbours less than `gap` bytes apart share a run, up to
   `maxrun` bytes (a longer request is a run of its own), and a run stays
   within one of the `nreg` readable regions (start, end pairs, sorted;
   none given: any).  The number of runs; *out points at them, three words
   each: first address, length, number of requests. */
uint64_t graphc_plan(graphc_t *h, uint64_t gap, uint64_t maxrun, const uint64_t *reg,
                     uint64_t nreg, const uint64_t **out)
{
    if (h->head) {                  /* drop those fed */
        memmove(h->req, h->req + h->head, (h->nreq - h->head) * sizeof(req_t));
        h->nreq -= h->head;
        h->head = 0;
    }
    sort_requests(h);
    free(h->runs);
    h->runs = NULL;
    uint64_t nr = 0, cap = 0, ri = 0;
    int64_t run_reg = -1;            /* the region the last run is in, -1: none */
    for (uint64_t k = 0; k < h->nreq; k++) {
        const req_t *r0 = &h->req[k];
        rq_t qq = {ADDR_OF(r0), r0->len, 0, 0, 0}, *q = &qq;
        uint64_t end = q->addr + q->len;
        int64_t in = -1;
        while (ri < nreg && reg[2 * ri + 1] <= q->addr)
            ri++;
        if (ri < nreg && reg[2 * ri] <= q->addr && end <= reg[2 * ri + 1])
            in = (int64_t)ri;
        if (nr && (in == run_reg || !nreg) && (in >= 0 || !nreg)) {
            uint64_t *r = &h->runs[3 * (nr - 1)];
            uint64_t rend = r[0] + r[1];
            if (q->addr <= rend + gap && (end <= rend || end - r[0] <= maxrun)) {
                if (end > rend)
                    r[1] = end - r[0];
                r[2]++;
                continue;
            }
        }
        uint64_t *g = grow(h->runs, &cap, 3 * (nr + 1), 8, &h->oom);
        if (!g)
            return 0;
        h->runs = g;
        g[3 * nr] = q->addr; g[3 * nr + 1] = q->len; g[3 * nr + 2] = 1;
        nr++;
        run_reg = in;
    }
    h->planned = h->nreq;
    *out = h->runs;
    return nr;
}

/* The next waiting request's address and length (0 when none is). */
int graphc_peek(const graphc_t *h, uint64_t *addr_len)
{
    if (h->head >= h->planned)
        return 0;
    addr_len[0] = ADDR_OF(&h->req[h->head]);
    addr_len[1] = h->req[h->head].len;
    return 1;
}

/* A table's header, as its request's bytes hold it. */
static tab_t tab_header(const struct graphc_layout *L, uint32_t owner, const uint8_t *p)
{
    tab_t t;
    t.owner = owner;
    t.mt = get(p + L->tab_mt, L->rs);
    t.asize = (uint32_t)get(p + L->tab_asize, 4);
    t.hmask = (uint32_t)get(p + L->tab_hmask, 4);
    t.arr = get(p + L->tab_array, L->ms);
    t.node = get(p + L->tab_node, L->ms);
    return t;
}

/* The table kept until graphc_set_weak makes requests of its parts. */
static int keep_tab(graphc_t *h, const tab_t *t)
{
    tab_t *ts = grow(h->tabs, &h->captabs, h->ntabs + 1, sizeof(tab_t), &h->oom);
    if (!ts)
        return -1;
    h->tabs = ts;
    ts[h->ntabs++] = *t;
    return 0;
}

/* A table's array and hash part become requests, but for the halves its
   weak mode (bit 0 keys, bit 1 values) leaves out.  (aux: the array
   piece's number, for the snapshot's element indices.) */
static int table_parts(graphc_t *h, const tab_t *t, uint32_t mode)
{
    if (t->asize && t->arr && t->asize < (1u << 28) && !(mode & 2))
        for (uint64_t first = 0; first < t->asize; first += ARR_PIECE) {
            uint64_t c = t->asize - first < ARR_PIECE ? t->asize - first : ARR_PIECE;
            if (add_req(h, t->arr + 8 * first, (uint32_t)(8 * c), t->owner, K_ARR,
                        (uint32_t)(first / ARR_PIECE)))
                return -1;
        }
    if (t->node && t->hmask < (1u << 27) && mode != 3) {
        uint64_t total = (uint64_t)t->hmask + 1;
        for (uint64_t first = 0; first < total; first += NODE_PIECE) {
            uint64_t c = total - first < NODE_PIECE ? total - first : NODE_PIECE;
            if (add_req(h, t->node + first * h->L.node_size,
                        (uint32_t)(c * h->L.node_size), t->owner, K_NODE, mode))
                return -1;
        }
    }
    return 0;
}

/* A table with no metatable is weak in neither half: its parts are asked
   for at once.  One with a metatable is kept until graphc_set_weak knows
   its mode. */
static int table_next(graphc_t *h, const tab_t *t)
{
    return t->mt ? keep_tab(h, t) : table_parts(h, t, 0);
}

static int decode(graphc_t *h, const rq_t *q, const uint8_t *p)
{
    const struct graphc_layout *L = &h->L;
    uint32_t o = q->owner;
    switch (q->kind) {
    case K_TAB: {
        tab_t t = tab_header(L, o, p);
        return edge(h, o, 0, t.mt) ? -1 : table_next(h, &t);
    }
    case K_FUNC: {
        uint32_t nup = p[L->fn_nup];
        if (edge(h, o, 0, get(p + L->fn_env, L->rs)))
            return -1;
        if (p[L->fn_ffid] == 0) {             /* FF_LUA */
            if (edge(h, o, 0, get(p + L->fnl_pc, L->ms) - L->pt_size))
                return -1;
            for (uint32_t i = 0; i < nup; i++) {
                if ((uint64_t)L->fnl_uvptr + (i + 1) * L->rs > q->len)
                    break;
                uint64_t uv = get(p + L->fnl_uvptr + i * L->rs, L->rs);
                if (h->strong) {        /* its value, once the upvalue is read */
                    if (uv && add_req(h, uv, L->uv_size, o, K_UPVAL, i + 1))
                        return -1;
                } else if (edge(h, o, 0, uv)) {
                    return -1;
                }
            }
        } else {
            for (uint32_t i = 0; i < nup; i++) {
                if ((uint64_t)L->fnc_upvalue + (i + 1) * 8 > q->len)
                    break;
                if (edge(h, o, 0, gc_of(h, get(p + L->fnc_upvalue + 8 * i, 8))))
                    return -1;
            }
        }
        return 0;
    }
    case K_UPVAL: {           /* aux: the closure's upvalue index + 1, or 0 */
        uint64_t v = get(p + L->uv_v, L->ms);
        if (v >= q->addr && v + 8 <= q->addr + q->len)
            return edge_k(h, o, q->aux ? 1 : 0, q->aux, gc_of(h, get(p + (v - q->addr), 8)));
        return v ? add_req(h, v, 8, o, K_UVVAL, q->aux) : 0;
    }
    case K_UVVAL:
        return edge_k(h, o, q->aux ? 1 : 0, q->aux, gc_of(h, get(p, 8)));
    case K_THREAD: {            /* its environment, then its stack's slots */
        uint64_t stack = get(p + L->th_stack, L->ms), top = get(p + L->th_top, L->ps);
        if (edge(h, o, 0, get(p + L->th_env, L->rs)))
            return -1;
        uint64_t n = top > stack ? (top - stack) / 8 : 0;
        return stack && n && n < (1u << 24) ? add_req(h, stack, (uint32_t)(8 * n), o, K_STACK, 0)
                                             : 0;
    }
    case K_STACK:               /* (a slot holding the thread itself is none) */
        for (uint32_t i = 0; i < q->len / 8; i++) {
            uint64_t v = gc_of(h, get(p + 8 * i, 8));
            if (v != h->addrs[o] && edge(h, o, 0, v))
                return -1;
        }
        return 0;
    case K_ARR: {
        uint32_t cnt = q->len / 8;
        for (uint32_t i = 0; i < cnt; i++) {
            part_ahead(h, p, i, cnt, 8, 0);
            if (edge(h, o, 1, gc_of(h, get(p + 8 * i, 8))))
                return -1;
        }
        return 0;
    }
    case K_NODE: {
        uint32_t ns = L->node_size, cnt = q->len / ns;
        int wk = q->aux & 1, wv = q->aux & 2;
        for (uint32_t j = 0; j < cnt; j++) {
            if (!wv)
                part_ahead(h, p, j, cnt, ns, L->node_val);
            const uint8_t *nd = p + j * ns;
            uint64_t vraw = get(nd + L->node_val, 8);
            if (!wv && edge(h, o, 2, gc_of(h, vraw)))
                return -1;
            if (!wk && (vraw >> L->nil_shift) != L->nil_top &&
                edge(h, o, 3, gc_of(h, get(nd + L->node_key, 8))))
                return -1;
        }
        return 0;
    }
    }
    return 0;
}

/* Decode every waiting request (from the first not yet fed, in the order
   graphc_plan left them) that lies within [base, base + len): buf
   holds those bytes.  Returns how many were decoded, -1 out of memory. */
int64_t graphc_feed(graphc_t *h, uint64_t base, const uint8_t *buf, uint64_t len)
{
    int64_t done = 0;
    uint64_t end = h->planned;   /* requests added while feeding wait for the next plan */
    while (h->head < end) {
        const req_t *r = &h->req[h->head];
        rq_t q = {ADDR_OF(r), r->len, r->owner, (uint32_t)(r->w >> ADDR_BITS & 0xFFF),
                  (uint32_t)(r->w >> 60)};
        if (q.addr < base || q.addr + q.len > base + len)
            break;
        h->head++;
        if ((h->named ? decode_named : decode)(h, &q, buf + (q.addr - base)))
            return -1;
        done++;
    }
    return done;
}

/* Every request read: their memory back. */
void graphc_read_all(graphc_t *h)
{
    free(h->req); free(h->runs);
    h->req = NULL;
    h->runs = NULL;
    h->nreq = h->capreq = h->head = h->planned = 0;
}

/* Pass over the next waiting request (it could not be read). */
void graphc_skip(graphc_t *h)
{
    if (h->head < h->planned) {
        h->head++;
        if (h->strings)
            string_missing(h);
    }
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct metatables of the tables decoded so far, sorted: their
   count; *out points at them. */
uint64_t graphc_metatables(graphc_t *h, const uint64_t **out)
{
    free(h->mts);
    h->mts = malloc((h->ntabs + 1) * 8);
    if (!h->mts) {
        h->oom = 1;
        return 0;
    }
    uint64_t m = 0;
    for (uint64_t k = 0; k < h->ntabs; k++)
        if (h->tabs[k].mt)
            h->mts[m++] = h->tabs[k].mt;
    qsort(h->mts, m, 8, by_u64);
    uint64_t u = 0;
    for (uint64_t k = 0; k < m; k++)
        if (!u || h->mts[u - 1] != h->mts[k])
            h->mts[u++] = h->mts[k];
    h->nmts = u;
    *out = h->mts;
    return u;
}

/* modes[k]: bit 0 weak keys, bit 1 weak values of the tables whose
   metatable is graphc_metatables's k-th; then those tables' array and
   hash parts become requests (a table with no metatable asked for its
   parts when it was decoded). */
int graphc_set_weak(graphc_t *h, const uint8_t *modes)
{
    for (uint64_t k = 0; k < h->ntabs; k++) {
        tab_t *t = &h->tabs[k];
        uint32_t mode = 0;
        if (t->mt) {
            uint64_t lo = 0, hi = h->nmts;
            while (lo < hi) {
                uint64_t mid = (lo + hi) >> 1;
                if (h->mts[mid] < t->mt)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < h->nmts && h->mts[lo] == t->mt)
                mode = modes[lo];
        }
        if (h->named && mode) {     /* a weak table's parts are named in Python */
            uint32_t *w = grow(h->wtabs, &h->capwtabs, h->nwtabs + 1, 4, &h->oom);
            if (!w)
                return -1;
            h->wtabs = w;
            w[h->nwtabs++] = t->owner;
            continue;
        }
        if (table_parts(h, t, mode))
            return -1;
    }
    free(h->tabs);
    h->tabs = NULL;
    h->ntabs = h->captabs = 0;
    return 0;
}

/* References of the object at index owner found by Python, in order. */
int graphc_add(graphc_t *h, uint32_t owner, const uint64_t *targets, uint64_t count)
{
    for (uint64_t k = 0; k < count; k++)
        if (edge(h, owner, 0, targets[k]))
            return -1;
    return 0;
}

/* The references in CSR form: each object's targets in the order of its
   parts (as emitted within a part), each target once. */
static int build_csr(graphc_t *h)
{
    uint64_t n = h->n, E = h->nedge;
    if (h->off)
        return 0;                   /* (built already: graphc_csr) */
    drop_dir(h);                    /* (no more references come) */
    uint32_t *off = calloc(n + 1, 4);
    uint32_t *dst = malloc((E ? E : 1) * 4);
    uint8_t *part = malloc(E ? E : 1);
    uint32_t *key = h->ekey ? malloc((E ? E : 1) * 4) : NULL;
    if (!off || !dst || !part || (h->ekey && !key)) {
        free(off); free(dst); free(part); free(key);
        return -1;
    }
    for (uint64_t e = 0; e < E; e++)
        off[(h->esrc[e] & 0x3FFFFFFF) + 1]++;
    for (uint64_t i = 0; i < n; i++)
        off[i + 1] += off[i];
    /* (off[s] is object s's next place as it fills: each ends as the
       start of the next, and all move back one place after) */
    for (uint64_t e = 0; e < E; e++) {
        uint32_t s = h->esrc[e] & 0x3FFFFFFF;
        uint32_t k = off[s]++;
        dst[k] = h->edst[e];
        part[k] = (uint8_t)(h->esrc[e] >> 30);
        if (key)
            key[k] = h->ekey[e];
    }
    for (uint64_t i = n; i > 0; i--)
        off[i] = off[i - 1];
    off[0] = 0;
    /* at[]: the last object to have seen each target, plus one; in the
       references' own memory when it is large enough (already touched). */
    uint32_t *at = h->capedge >= n && h->esrc ? h->esrc : malloc((n ? n : 1) * 4);
    if (at != h->esrc)
        free(h->esrc);
    free(h->edst); free(h->ekey);
    h->esrc = h->edst = h->ekey = NULL;
    h->nedge = h->capedge = 0;
    if (!at) {
        free(off); free(dst); free(part); free(key);
        return -1;
    }
    /* Within each object: stable by part, then each target once. */
    memset(at, 0, n * 4);
    uint32_t *tmp = NULL;
    uint64_t captmp = 0;
    uint32_t w = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t a = off[i], b = off[i + 1];
        off[i] = w;
        int mixed = 0, keyed = 0;
        for (uint32_t k = a + 1; k < b; k++)
            if (part[k] < part[k - 1] ||
                (key && part[k] == part[k - 1] && key[k] < key[k - 1])) {
                mixed = 1;
                break;
            }
        for (uint32_t k = a; mixed && key && k < b; k++)
            keyed |= key[k] != 0;
        if (keyed) {
            /* A closure's upvalues, read in address order: back to their
               order (few: an insertion sort, stable). */
            for (uint32_t k = a + 1; k < b; k++) {
                uint32_t d = dst[k], ky = key[k];
                uint8_t pt = part[k];
                uint32_t j = k;
                while (j > a && (part[j - 1] > pt || (part[j - 1] == pt && key[j - 1] > ky))) {
                    dst[j] = dst[j - 1]; part[j] = part[j - 1]; key[j] = key[j - 1];
                    j--;
                }
                dst[j] = d; part[j] = pt; key[j] = ky;
            }
        } else if (mixed) {
            tmp = grow(tmp, &captmp, b - a, 4, &h->oom);
            if (!tmp) {
                free(off); free(dst); free(part); free(at); free(key);
                return -1;
            }
            uint32_t m = 0;
            for (uint8_t p = 0; p < 4; p++)
                for (uint32_t k = a; k < b; k++)
                    if (part[k] == p)
                        tmp[m++] = dst[k];
            memcpy(dst + a, tmp, (b - a) * 4);
        }
        for (uint32_t k = a; k < b; k++) {
            uint32_t t = dst[k];
            if (at[t] == i + 1)
                continue;
            at[t] = (uint32_t)(i + 1);
            dst[w++] = t;
        }
    }
    off[n] = w;
    free(tmp); free(part); free(at); free(key);
    h->off = off;
    h->dst = realloc(dst, (w ? w : 1) * 4);
    if (!h->dst)
        h->dst = dst;
    h->ndst = w;
    return 0;
}

/* The references in CSR form now, before the caller makes the arrays
   that graphc_bfs or graphc_dominators fill: the references as found are
   let go of first, so the two are never held together.  0, or -1 out of
   memory. */
int graphc_csr(graphc_t *h)
{
    return build_csr(h);
}

/* The nearest common ancestor of a and b in the tree of guesses (a
   dominator has a smaller number than what it dominates). */
static inline int32_t common(const int32_t *idom, int32_t a, int32_t b)
{
    while (a != b) {
        while (a > b) a = idom[a];
        while (b > a) b = idom[b];
    }
    return a;
}

/* The search's queue holds objects in the order they were reached, which
   on a heap filled in any order is no order of their indices: the CSR's
   words of the object AHEAD places on are asked for, its targets' when
   it is AHEAD / 2 on, and their marks (num[], parent[]: the first four)
   when it is AHEAD / 4 on, so that the misses overlap. */
#define BFS_AHEAD(off, dst, mark, queue, head, tail) do { \
        if ((head) + AHEAD < (tail)) \
            __builtin_prefetch(&(off)[(queue)[(head) + AHEAD]]); \
        if ((head) + AHEAD / 2 < (tail)) \
            __builtin_prefetch(&(dst)[(off)[(queue)[(head) + AHEAD / 2]]]); \
        if ((head) + AHEAD / 4 < (tail)) { \
            uint32_t q_ = (queue)[(head) + AHEAD / 4], k_ = (off)[q_], e_ = (off)[q_ + 1]; \
            for (uint32_t n_ = 0; k_ < e_ && n_ < 4; k_++, n_++) \
                __builtin_prefetch(&(mark)[(dst)[k_]]); \
        } \
    } while (0)

/* heapdom.Dominators: roots (indices, each once, in order); the caller's
   arrays of n entries each receive num (by index), and order, idom,
   parent, retained and count (by number: the first `reached`, see
   graphc_result).  0, or -1 out of memory. */
int graphc_dominators(graphc_t *h, const uint32_t *roots, uint64_t nroots, int32_t *num,
                      uint32_t *order, int32_t *idom, int32_t *parent, uint64_t *ret,
                      uint32_t *cnt)
{
    if (build_csr(h))
        return -1;
    uint64_t n = h->n;
    uint8_t *many = calloc(n ? n : 1, 1);
    uint32_t *iu = NULL, *iv = NULL;
    uint64_t ni = 0, capu = 0, capv = 0;
    if (!many)
        return -1;
    memset(num, 0xff, n * 4);
    uint64_t m = 0;
    for (uint64_t r = 0; r < nroots; r++) {
        uint32_t i = roots[r];
        if (i < n && num[i] == -1) {
            num[i] = (int32_t)m;
            order[m] = i; idom[m] = -1; parent[m] = -1;
            m++;
        }
    }
    for (uint64_t head = 0; head < m; head++) {
        int32_t u = (int32_t)head;
        uint32_t i = order[head];
        BFS_AHEAD(h->off, h->dst, num, order, head, m);
        uint32_t end = h->off[i + 1];
        for (uint32_t k = h->off[i]; k < end; k++) {
            if (end - k > AHEAD)
                __builtin_prefetch(&num[h->dst[k + AHEAD]]);
            uint32_t j = h->dst[k];
            int32_t v = num[j];
            if (v == -1) {
                num[j] = v = (int32_t)m;
                order[m] = j; idom[m] = u; parent[m] = u;
                m++;
                continue;
            }
            if (v == u || idom[v] == -1)
                continue;
            uint64_t need = ni + 2;
            iu = grow(iu, &capu, need, 4, &h->oom);
            iv = grow(iv, &capv, need, 4, &h->oom);
            if (!iu || !iv) {
                free(iu); free(iv); free(many);
                return -1;
            }
            if (!many[j]) {
                many[j] = 1;
                iu[ni] = (uint32_t)parent[v]; iv[ni++] = (uint32_t)v;
            }
            iu[ni] = (uint32_t)u; iv[ni++] = (uint32_t)v;
            idom[v] = common(idom, u, idom[v]);
        }
    }
    free(many);
    free(h->off); free(h->dst);
    h->off = h->dst = NULL;
    h->references = ni;
    uint64_t passes = 0;
    int changed = 1;
    while (changed) {
        changed = 0;
        passes++;
        for (uint64_t k = 0; k < ni; k++) {
            int32_t v = (int32_t)iv[k], old = idom[v], a = common(idom, (int32_t)iu[k], old);
            if (a != old) {
                idom[v] = a;
                changed = 1;
            }
        }
    }
    free(iu); free(iv);
    h->passes = passes;
    h->norder = m;
    /* (in order of number, the objects' and their dominators' indices are
       in no order: each read asked for AHEAD on) */
    for (uint64_t k = 0; k < m; k++) {
        if (k + AHEAD < m)
            __builtin_prefetch(&h->sizes[order[k + AHEAD]]);
        ret[k] = h->sizes[order[k]];
        cnt[k] = 1;
    }
    for (int64_t k = (int64_t)m - 1; k >= 0; k--) {
        int32_t d = idom[k];
        if (k >= AHEAD && idom[k - AHEAD] >= 0) {
            __builtin_prefetch(&ret[idom[k - AHEAD]]);
            __builtin_prefetch(&cnt[idom[k - AHEAD]]);
        }
        if (d >= 0) {
            ret[d] += ret[k];
            cnt[d] += cnt[k];
        }
    }
    return 0;
}

/* lgcpath's search: breadth first from the roots (indices, in order)
   until the object at index `target` is reached; parent (the caller's, n
   entries) receives each object's parent index (-2: a root, -1: not reached).  0, or -1 out of
   memory. */
int graphc_bfs(graphc_t *h, const uint32_t *roots, uint64_t nroots, uint32_t target,
               int32_t *parent)
{
    if (build_csr(h))
        return -1;
    uint64_t n = h->n;
    uint32_t *queue = malloc((n ? n : 1) * 4);
    if (!queue)
        return -1;
    memset(parent, 0xff, n * 4);
    uint64_t tail = 0;
    for (uint64_t r = 0; r < nroots; r++)
        if (roots[r] < n && parent[roots[r]] == -1) {
            parent[roots[r]] = -2;
            queue[tail++] = roots[r];
        }
    for (uint64_t head = 0; head < tail && target < n && parent[target] == -1; head++) {
        uint32_t i = queue[head];
        BFS_AHEAD(h->off, h->dst, parent, queue, head, tail);
        uint32_t end = h->off[i + 1];
        for (uint32_t k = h->off[i]; k < end; k++) {
            if (end - k > AHEAD)
                __builtin_prefetch(&parent[h->dst[k + AHEAD]]);
            uint32_t j = h->dst[k];
            if (parent[j] == -1) {
                parent[j] = (int32_t)i;
                queue[tail++] = j;
            }
        }
    }
    free(queue);
    return 0;
}

/* What graphc_dominators counted: the objects reached, the references
   into objects held more than once, the passes. */
void graphc_result(const graphc_t *h, uint64_t *out)
{
    out[0] = h->norder; out[1] = h->references; out[2] = h->passes;
}

/* For Dominators.top: a retains less than b (or as much, with a larger
   number). */
static inline int worse(const uint64_t *ret, uint32_t a, uint32_t b)
{
    return ret[a] < ret[b] || (ret[a] == ret[b] && a > b);
}

/* Put x at the root of the min-heap out[0..size) (by worse()) and sift it
   down. */
static void sift_down(const uint64_t *ret, uint32_t *out, uint64_t size, uint32_t x)
{
    uint64_t c = 0;
    for (;;) {
        uint64_t l = 2 * c + 1, r = l + 1, w = c;
        uint32_t wv = x;
        if (l < size && worse(ret, out[l], wv)) {
            w = l;
            wv = out[l];
        }
        if (r < size && worse(ret, out[r], wv))
            w = r;
        if (w == c)
            break;
        out[c] = out[w];
        c = w;
    }
    out[c] = x;
}

/* Dominators.top: the numbers of the `count` objects (of m) that retain
   the most bytes, most first, ties by number; objects whose type
   (gcts[order[k]]) has its bit in `skip` left out.  Writes them to out;
   returns how many. */
uint64_t graphc_top(const uint64_t *ret, const uint32_t *order, const uint8_t *gcts, uint64_t m,
                    uint32_t skip, uint64_t count, uint32_t *out)
{
    /* out[0..have) is a min-heap by worse(): its root is the one to drop. */
    uint64_t have = 0;
    if (!count)
        return 0;
    for (uint64_t k = 0; k < m; k++) {
        if (skip >> gcts[order[k]] & 1)
            continue;
        uint32_t x = (uint32_t)k;
        if (have < count) {
            uint64_t c = have++;
            while (c) {
                uint64_t p = (c - 1) / 2;
                if (!worse(ret, x, out[p]))
                    break;
                out[c] = out[p];
                c = p;
            }
            out[c] = x;
        } else if (worse(ret, out[0], x)) {
            sift_down(ret, out, have, x);
        }
    }
    /* Heap order to best first: the worst left goes to the end, repeatedly. */
    for (uint64_t end = have; end > 1; end--) {
        uint32_t worst = out[0];
        sift_down(ret, out, end - 1, out[end - 1]);
        out[end - 1] = worst;
    }
    return have;
}

/* Dominators.unreached: out[0] objects, out[1] bytes whose num is -1. */
void graphc_unreached(const int32_t *num, const uint64_t *sizes, uint64_t n, uint64_t *out)
{
    uint64_t objs = 0, bytes = 0;
    for (uint64_t i = 0; i < n; i++)
        if (num[i] == -1) {
            objs++;
            bytes += sizes[i];
        }
    out[0] = objs;
    out[1] = bytes;
}

/* heapdom.Dominators.shared_by_roots: over the m numbered objects whose
   immediate dominator is the virtual root (idom -1), out[2] sums their
   retained bytes; out[0] and out[1] the objects and bytes of those that
   are no root (the roots are numbered 0 to nroots - 1). */
void graphc_shared(const int32_t *idom, const uint64_t *ret, const uint32_t *cnt, uint64_t m,
                   uint64_t nroots, uint64_t *out)
{
    uint64_t objs = 0, bytes = 0, total = 0;
    for (uint64_t k = 0; k < m; k++)
        if (idom[k] == -1) {
            total += ret[k];
            if (k >= nroots) {
                objs += cnt[k];
                bytes += ret[k];
            }
        }
    out[0] = objs;
    out[1] = bytes;
    out[2] = total;
}

/* One 16 MB region of the heap walk's kept objects (gcstat.HeapWalker.
   objects): words[0..count) hold offset << 40 | dead << 39 | gct << 35 |
   size; sorted, then split into the arrays (the addresses base | offset). */
void graphc_split(uint64_t *words, uint64_t count, uint64_t base, uint64_t *addrs,
                  uint64_t *sizes, uint8_t *gcts, uint8_t *dead)
{
    qsort(words, count, 8, by_u64);
    for (uint64_t k = 0; k < count; k++) {
        uint64_t w = words[k];
        addrs[k] = base | w >> 40;
        sizes[k] = w & ((1ull << 35) - 1);
        gcts[k] = (uint8_t)(w >> 35 & 15);
        dead[k] = (uint8_t)(w >> 39 & 1);
    }
}

/* lgcref's candidates: from now on no reference is kept; found[i] is set
   to 1 for each object i fed that refers to the object at index target
   (the caller's array of n bytes, zeroed). */
void graphc_find(graphc_t *h, uint32_t target, uint8_t *found)
{
    h->find = target;
    h->found = found;
}

/* heapsnap.Diff: the objects now (addrs, gcts, sizes: n) against a
   snapshot's (oa, og, osz: m), both in address order.  new_index and
   resized_index (as many entries as there are of each, or NULL: counted
   only) receive the indices now of the new objects (not there then, or of
   another type) and of those whose size changed; counts[0], counts[1] how
   many.  stats[16 * 2 * w + 2 * gct]
   and the next word: count and bytes of the new (w 0), the freed (w 1)
   and the resized (w 2: bytes now - then, as a two's complement). */
void graphc_diff(const uint64_t *addrs, const uint8_t *gcts, const uint64_t *sizes, uint64_t n,
                 const uint64_t *oa, const uint8_t *og, const uint64_t *osz, uint64_t m,
                 uint32_t *new_index, uint32_t *resized_index, uint64_t *counts,
                 uint64_t *stats)
{
    uint64_t i = 0, j = 0, nn = 0, nr = 0;
    uint64_t *nw = stats, *fr = stats + 32, *rs = stats + 64;
    while (i < n || j < m) {
        if (j >= m || (i < n && addrs[i] < oa[j])) {
            nw[2 * (gcts[i] & 15)]++;
            nw[2 * (gcts[i] & 15) + 1] += sizes[i];
            if (new_index)
                new_index[nn] = (uint32_t)i;
            nn++;
            i++;
        } else if (i >= n || oa[j] < addrs[i]) {
            fr[2 * (og[j] & 15)]++;
            fr[2 * (og[j] & 15) + 1] += osz[j];
            j++;
        } else {
            if (gcts[i] != og[j]) {
                fr[2 * (og[j] & 15)]++;
                fr[2 * (og[j] & 15) + 1] += osz[j];
                nw[2 * (gcts[i] & 15)]++;
                nw[2 * (gcts[i] & 15) + 1] += sizes[i];
                if (new_index)
                    new_index[nn] = (uint32_t)i;
                nn++;
            } else if (sizes[i] != osz[j]) {
                rs[2 * (gcts[i] & 15)]++;
                rs[2 * (gcts[i] & 15) + 1] += sizes[i] - osz[j];
                if (resized_index)
                    resized_index[nr] = (uint32_t)i;
                nr++;
            }
            i++;
            j++;
        }
    }
    counts[0] = nn;
    counts[1] = nr;
}

/* heapsnap.Diff.owners: owner[k] for each object numbered k (of m): the
   nearest of its dominators that is not new (is_new by heap index), -1
   where that is the roots. */
void graphc_owners(const uint32_t *order, const int32_t *idom, uint64_t m, const uint8_t *is_new,
                   int32_t *owner)
{
    for (uint64_t k = 0; k < m; k++) {
        int32_t d = idom[k];
        if (d < 0)
            owner[k] = -1;
        else if (is_new[order[d]])
            owner[k] = owner[d];
        else
            owner[k] = d;
    }
}

/* ---- The heap snapshot ----------------------------------------------------
   heapsnapshot.py's V8 document, its graph named as SnapshotWriter names it
   in Python: each reference keeps its edge type and name (a string's index,
   or an element's index), none is merged, and the document's nodes, edges
   and the strings' texts are written here, a buffer at a time.

   Names the C code cannot make come from Python once each: a metatable's
   __name (P_MT), a prototype's chunk:line (P_SITE) and upvalue names
   (P_UV), a builtin's (P_FF), a C function's upvalue (P_CUV), a key that is
   neither a string nor a whole number (P_KEY).  A string node is named by
   its own text, written last: its name is STRFLAG | its rank among the
   strings, which the writer turns into the index after Python's strings;
   a hash slot whose key is a string is named by that string's node. */
enum { E_CONTEXT = 0, E_ELEMENT = 1, E_PROPERTY = 2, E_INTERNAL = 3, E_WEAK = 6 };
enum { N_MT, N_ENV, N_PROTO, N_KEY, N_VALUE };
enum { P_MT = 1, P_SITE, P_FF, P_UV, P_CUV, P_KEY };
#define STRFLAG 0x80000000u
#define OBUF (1u << 20)

/* A named reference: its index, -1 when it is dropped (no object of the
   walk), -2 out of memory. */
static int64_t nedge(graphc_t *h, uint32_t owner, uint32_t part, uint8_t type, uint32_t name,
                     uint64_t target)
{
    if (!target)
        return -1;
    int64_t j = position(h, target);
    if (j < 0)
        return -1;
    if (edge_room(h))
        return -2;
    h->esrc[h->nedge] = owner | part << 30;
    h->edst[h->nedge] = (uint32_t)j;
    h->ename[h->nedge] = name;
    h->etype[h->nedge] = type;
    return (int64_t)h->nedge++;
}

#define NE(owner, part, type, name, target) \
    do { if (nedge(h, owner, part, type, name, target) == -2) return -1; } while (0)

#define NO_SLOT 0xFFFFFFFFu

static inline uint64_t dhash(uint64_t key, uint32_t sub, uint32_t cls)
{
    return key * 0x9E3779B97F4A7C15ull ^ (uint64_t)sub << 40 ^ cls;
}

/* The number of (cls, key, sub) among the distinct ones, added if new;
   -1 out of memory. */
static int64_t distinct(graphc_t *h, uint32_t cls, uint64_t key, uint32_t sub)
{
    if (2 * (h->ndk + 1) > (h->dslot ? h->dmask + 1 : 0)) {
        uint64_t size = h->dslot ? 2 * (h->dmask + 1) : 1024;
        uint32_t *sl = malloc(size * 4);
        if (!sl) {
            h->oom = 1;
            return -1;
        }
        memset(sl, 0xff, size * 4);
        free(h->dslot);
        h->dslot = sl;
        h->dmask = size - 1;
        for (uint64_t d = 0; d < h->ndk; d++) {
            const dkey_t *k = &h->dk[d];
            uint64_t at = dhash(k->key, k->sub, k->cls) & h->dmask;
            while (sl[at] != NO_SLOT)
                at = (at + 1) & h->dmask;
            sl[at] = (uint32_t)d;
        }
    }
    uint64_t at = dhash(key, sub, cls) & h->dmask;
    for (;; at = (at + 1) & h->dmask) {
        uint32_t d = h->dslot[at];
        if (d == NO_SLOT)
            break;
        if (h->dk[d].key == key && h->dk[d].sub == sub && h->dk[d].cls == cls)
            return d;
    }
    dkey_t *dk = grow(h->dk, &h->capdk, h->ndk + 1, sizeof(dkey_t), &h->oom);
    if (!dk)
        return -1;
    h->dk = dk;
    dk[h->ndk].key = key; dk[h->ndk].sub = sub; dk[h->ndk].cls = cls;
    h->dslot[at] = (uint32_t)h->ndk;
    return (int64_t)h->ndk++;
}

/* `what` (a node for P_MT, P_SITE, P_FF; else an edge) waits for the name
   of (cls, key, sub). */
static int pend(graphc_t *h, uint32_t cls, uint64_t what, uint32_t sub, uint64_t key)
{
    int64_t d = distinct(h, cls, key, sub);
    if (d < 0)
        return -1;
    pend_t *p = grow(h->pend, &h->cappend, h->npend + 1, sizeof(pend_t), &h->oom);
    if (!p)
        return -1;
    h->pend = p;
    p[h->npend].what = (uint32_t)what;
    p[h->npend++].id = (uint32_t)d;
    return 0;
}

static inline int is_str_tv(const graphc_t *h, uint64_t raw)
{
    return h->L.gc64 ? raw >> 47 == 0x1FFFBull : raw >> 32 == 0xFFFFFFFBull;
}

/* A double (LJ_TISNUM: ~13 in GC64's 17 bits, 0xFFFEFFFF in 32). */
static inline int is_num_tv(const graphc_t *h, uint64_t raw)
{
    return h->L.gc64 ? raw >> 47 < 0x1FFF2ull : raw >> 32 < 0xFFFEFFFFull;
}

static void string_text(graphc_t *h, uint32_t k, const uint8_t *p, uint32_t len);

static int decode_named(graphc_t *h, const rq_t *q, const uint8_t *p)
{
    const struct graphc_layout *L = &h->L;
    const uint32_t *F = h->fixed;
    uint32_t o = q->owner;
    switch (q->kind) {
    case K_TAB: {
        tab_t t = tab_header(L, o, p);
        NE(o, 0, E_INTERNAL, F[N_MT], t.mt);
        if (t.mt && pend(h, P_MT, o, 0, t.mt))
            return -1;
        return table_next(h, &t);
    }
    case K_FUNC: {
        uint32_t nup = p[L->fn_nup], ffid = p[L->fn_ffid];
        NE(o, 0, E_INTERNAL, F[N_ENV], get(p + L->fn_env, L->rs));
        if (ffid == 0) {             /* FF_LUA */
            uint64_t pt = get(p + L->fnl_pc, L->ms) - L->pt_size;
            NE(o, 0, E_INTERNAL, F[N_PROTO], pt);
            if (pend(h, P_SITE, o, 0, pt))
                return -1;
            for (uint32_t i = 0; i < nup; i++) {
                if ((uint64_t)L->fnl_uvptr + (i + 1) * L->rs > q->len)
                    break;
                int64_t e = nedge(h, o, 0, E_CONTEXT, 0, get(p + L->fnl_uvptr + i * L->rs, L->rs));
                if (e == -2 || (e >= 0 && pend(h, P_UV, (uint64_t)e, i, pt)))
                    return -1;
            }
            return 0;
        }
        if (pend(h, P_FF, o, 0, ffid))
            return -1;
        for (uint32_t i = 0; i < nup; i++) {
            if ((uint64_t)L->fnc_upvalue + (i + 1) * 8 > q->len)
                break;
            int64_t e = nedge(h, o, 0, E_CONTEXT, 0, gc_of(h, get(p + L->fnc_upvalue + 8 * i, 8)));
            if (e == -2 || (e >= 0 && pend(h, P_CUV, (uint64_t)e, 0, i + 1)))
                return -1;
        }
        return 0;
    }
    case K_UPVAL: {
        uint64_t v = get(p + L->uv_v, L->ms);
        if (v >= q->addr && v + 8 <= q->addr + q->len) {
            NE(o, 0, E_INTERNAL, F[N_VALUE], gc_of(h, get(p + (v - q->addr), 8)));
            return 0;
        }
        return v ? add_req(h, v, 8, o, K_UVVAL, 0) : 0;
    }
    case K_UVVAL:
        NE(o, 0, E_INTERNAL, F[N_VALUE], gc_of(h, get(p, 8)));
        return 0;
    case K_ARR: {
        uint32_t first = q->aux * ARR_PIECE, cnt = q->len / 8;
        for (uint32_t i = 0; i < cnt; i++) {
            part_ahead(h, p, i, cnt, 8, 0);
            NE(o, 1, E_ELEMENT, first + i, gc_of(h, get(p + 8 * i, 8)));
        }
        return 0;
    }
    case K_NODE: {
        uint32_t ns = L->node_size, cnt = q->len / ns;
        for (uint32_t j = 0; j < cnt; j++) {
            part_ahead(h, p, j, cnt, ns, L->node_val);
            const uint8_t *nd = p + j * ns;
            uint64_t vraw = get(nd + L->node_val, 8), kraw = get(nd + L->node_key, 8);
            if ((vraw >> L->nil_shift) == L->nil_top)
                continue;                   /* an empty slot (a dead key) */
            uint64_t v = gc_of(h, vraw), k = gc_of(h, kraw);
            if (v) {
                int64_t e = -3;
                if (k && is_str_tv(h, kraw)) {
                    int64_t s = position(h, k);
                    if (s >= 0 && h->gcts[s] == GCT_STR)
                        e = nedge(h, o, 2, E_PROPERTY, STRFLAG | h->strrank[s], v);
                } else if (is_num_tv(h, kraw)) {
                    double d;
                    memcpy(&d, &kraw, 8);
                    if (d >= 0 && d < 4294967296.0 && d == (double)(uint32_t)d)
                        e = nedge(h, o, 2, E_ELEMENT, (uint32_t)d, v);
                }
                if (e == -3) {              /* named by Python */
                    e = nedge(h, o, 2, E_PROPERTY, 0, v);
                    if (e >= 0 && pend(h, P_KEY, (uint64_t)e, 0, kraw))
                        return -1;
                }
                if (e == -2)
                    return -1;
            }
            if (k)
                NE(o, 2, E_INTERNAL, F[N_KEY], k);
        }
        return 0;
    }
    case K_STR:
        string_text(h, o, p, q->len);
        return 0;
    }
    return 0;
}

/* The snapshot's graph from here on: names (n entries, the caller's)
   receives each node's name, bytype[gct] where nothing better is known;
   fixed: the names of a metatable, environment, prototype, key and value
   reference.  Before graphc_objects.  -1 out of memory. */
int graphc_snap_begin(graphc_t *h, uint32_t *names, const uint32_t *bytype, const uint32_t *fixed)
{
    h->named = 1;
    h->names = names;
    memcpy(h->fixed, fixed, sizeof h->fixed);
    h->strrank = malloc((h->n ? h->n : 1) * 4);
    if (!h->strrank) {
        h->oom = 1;
        return -1;
    }
    uint32_t r = 0;
    for (uint64_t k = 0; k < h->n; k++) {
        uint8_t g = h->gcts[k];
        if (g == GCT_STR) {
            h->strrank[k] = r;
            names[k] = STRFLAG | r++;
        } else {
            names[k] = bytype[g & 15];
        }
    }
    return 0;
}

/* The weak tables (their owners' indices), whose parts Python names:
   their count; *out points at them. */
uint64_t graphc_snap_weak_tables(const graphc_t *h, const uint32_t **out)
{
    *out = h->wtabs;
    return h->nwtabs;
}

/* The names Python is asked for: their count; *out points at them (key,
   then sub | cls << 32, a pair of words each). */
uint64_t graphc_snap_pending(const graphc_t *h, const uint64_t **out)
{
    *out = (const uint64_t *)h->dk;
    return h->ndk;
}

/* Python's answers, one for each graphc_snap_pending entry: names[d] (0 for
   a node: keep its name by type) and, for an edge, types[d] (0xFF: keep). */
void graphc_snap_resolve(graphc_t *h, const uint8_t *types, const uint32_t *names)
{
    for (uint64_t k = 0; k < h->npend; k++) {
        const pend_t *p = &h->pend[k];
        uint32_t cls = h->dk[p->id].cls;
        if (cls <= P_FF) {
            if (names[p->id])
                h->names[p->what] = names[p->id];
            continue;
        }
        h->ename[p->what] = names[p->id];
        if (types[p->id] != 0xFF)
            h->etype[p->what] = types[p->id];
    }
    free(h->pend); free(h->dk); free(h->dslot);
    h->pend = NULL; h->dk = NULL; h->dslot = NULL;
    h->npend = h->cappend = h->ndk = h->capdk = 0;
}

/* References of the object at index owner named by Python, in order
   (part: after the C code's own of that object, or 0). */
int graphc_snap_add(graphc_t *h, uint32_t owner, uint32_t part, const uint8_t *types,
                    const uint32_t *names, const uint64_t *targets, uint64_t count)
{
    for (uint64_t k = 0; k < count; k++)
        if (nedge(h, owner, part, types[k], names[k], targets[k]) == -2)
            return -1;
    return 0;
}

/* Every reference in the order of its object, and within it of its part
   (as they came within a part): off (n + 1), dst, ename and ety.  -1 out
   of memory. */
static int snap_sort(graphc_t *h)
{
    uint64_t n = h->n, E = h->nedge;
    drop_dir(h);
    uint32_t *off = calloc(n + 1, 4), *at = malloc((n ? n : 1) * 4);
    uint32_t *dst = malloc((E ? E : 1) * 4), *nm = malloc((E ? E : 1) * 4);
    uint8_t *ty = malloc(E ? E : 1);
    if (!off || !at || !dst || !nm || !ty) {
        free(off); free(at); free(dst); free(nm); free(ty);
        return -1;
    }
    for (uint64_t e = 0; e < E; e++)
        off[(h->esrc[e] & 0x3FFFFFFF) + 1]++;
    for (uint64_t i = 0; i < n; i++)
        off[i + 1] += off[i];
    memcpy(at, off, n * 4);
    for (uint64_t e = 0; e < E; e++) {
        uint32_t s = h->esrc[e] & 0x3FFFFFFF, k = at[s]++;
        dst[k] = h->edst[e];
        nm[k] = h->ename[e];
        ty[k] = (uint8_t)(h->etype[e] | (h->esrc[e] >> 30) << 4);
    }
    free(at);
    free(h->esrc); free(h->edst); free(h->ename); free(h->etype);
    h->esrc = h->edst = h->ename = NULL;
    h->etype = NULL;
    h->capedge = 0;
    uint32_t *t1 = NULL, *t2 = NULL;
    uint8_t *t3 = NULL;
    uint64_t c1 = 0, c2 = 0, c3 = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t a = off[i], b = off[i + 1], mixed = 0;
        for (uint32_t k = a + 1; k < b && !mixed; k++)
            mixed = ty[k] >> 4 < ty[k - 1] >> 4;
        if (mixed) {        /* stable by part */
            t1 = grow(t1, &c1, b - a, 4, &h->oom);
            t2 = grow(t2, &c2, b - a, 4, &h->oom);
            t3 = grow(t3, &c3, b - a, 1, &h->oom);
            if (!t1 || !t2 || !t3) {
                free(t1); free(t2); free(t3); free(off); free(dst); free(nm); free(ty);
                return -1;
            }
            uint32_t m = 0;
            for (uint8_t part = 0; part < 4; part++)
                for (uint32_t k = a; k < b; k++)
                    if (ty[k] >> 4 == part) {
                        t1[m] = dst[k]; t2[m] = nm[k]; t3[m++] = ty[k];
                    }
            memcpy(dst + a, t1, (b - a) * 4);
            memcpy(nm + a, t2, (b - a) * 4);
            memcpy(ty + a, t3, b - a);
        }
    }
    free(t1); free(t2); free(t3);
    for (uint64_t e = 0; e < E; e++)
        ty[e] &= 15;
    h->off = off; h->dst = dst; h->ename = nm; h->ety = ty;
    return 0;
}

static void wflush(graphc_t *h)
{
    uint64_t done = 0;
    while (done < h->olen && !h->werr) {
        ssize_t w = write(h->fd, h->obuf + done, h->olen - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            h->werr = w < 0 ? errno : EIO;
        else
            done += (uint64_t)w;
    }
    h->olen = 0;
}

static inline void wput(graphc_t *h, const char *s, uint64_t len)
{
    if (h->olen + len > OBUF)
        wflush(h);
    memcpy(h->obuf + h->olen, s, len);
    h->olen += len;
}

/* Numbers as text, each followed by sep (0: none). */
static inline char *put_u(char *p, uint64_t v, char sep)
{
    char tmp[24];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *p++ = tmp[--k];
    if (sep)
        *p++ = sep;
    return p;
}

static inline uint32_t name_of(uint32_t nm, uint32_t base)
{
    return nm & STRFLAG ? base + (nm & ~STRFLAG) : nm;
}

/* The writer on file descriptor fd (the caller's, flushed). */
int graphc_snap_open(graphc_t *h, int fd)
{
    h->fd = fd;
    h->werr = 0;
    h->olen = 0;
    if (!h->obuf && !(h->obuf = malloc(OBUF))) {
        h->oom = 1;
        return -1;
    }
    return 0;
}

/* What is buffered written: 0, or the errno of a failed write. */
int graphc_snap_flush(graphc_t *h)
{
    if (h->obuf)
        wflush(h);
    return h->werr;
}

/* The references sorted (graphc_snap_edges's order): their count, -1 out
   of memory. */
int64_t graphc_snap_sort(graphc_t *h)
{
    if (snap_sort(h)) {
        h->oom = 1;
        return -1;
    }
    return (int64_t)h->off[h->n];
}

/* The nodes of the heap's objects, each after ",\n" (bytype: V8's node
   type of each gct; base: the index of the first string node's text). */
void graphc_snap_nodes(graphc_t *h, const uint8_t *bytype, uint32_t base)
{
    char line[128];
    for (uint64_t k = 0; k < h->n; k++) {
        char *p = line;
        *p++ = ','; *p++ = '\n';
        p = put_u(p, bytype[h->gcts[k] & 15], ',');
        p = put_u(p, name_of(h->names[k], base), ',');
        p = put_u(p, 2 * k + 3, ',');
        p = put_u(p, h->sizes[k], ',');
        p = put_u(p, h->off[k + 1] - h->off[k], ',');
        *p++ = '0'; *p++ = ','; *p++ = '0';
        wput(h, line, (uint64_t)(p - line));
    }
}

/* The heap's objects' edges in node order, each after "," (none before
   the first when comma is 0). */
void graphc_snap_edges(graphc_t *h, int comma, uint32_t base)
{
    char line[64];
    uint64_t E = h->n ? h->off[h->n] : 0;
    for (uint64_t e = 0; e < E; e++) {
        char *p = line;
        if (e || comma)
            *p++ = ',';
        *p++ = '\n';
        uint8_t t = h->ety[e];
        p = put_u(p, t, ',');
        p = put_u(p, t == E_ELEMENT ? h->ename[e] : name_of(h->ename[e], base), ',');
        p = put_u(p, (uint64_t)(h->dst[e] + 1) * 7, 0);
        wput(h, line, (uint64_t)(p - line));
    }
}

/* ---- The strings' texts, as json.dumps writes Python's str (ASCII, the
   bytes decoded as UTF-8 with each bad sequence one U+FFFD). */
static void put_esc(graphc_t *h, uint32_t cp)
{
    static const char hex[] = "0123456789abcdef";
    char u[12];
    if (cp >= 0x10000) {
        cp -= 0x10000;
        put_esc(h, 0xD800 | cp >> 10);
        put_esc(h, 0xDC00 | (cp & 0x3FF));
        return;
    }
    u[0] = '\\'; u[1] = 'u';
    u[2] = hex[cp >> 12 & 15]; u[3] = hex[cp >> 8 & 15]; u[4] = hex[cp >> 4 & 15];
    u[5] = hex[cp & 15];
    wput(h, u, 6);
}

static void json_text(graphc_t *h, const uint8_t *s, uint32_t m, int cut)
{
    wput(h, ",\n\"", 3);
    uint32_t i = 0;
    while (i < m) {
        uint8_t b = s[i];
        if (b < 0x80) {
            const char *e = NULL;
            switch (b) {
            case '"': e = "\\\""; break;
            case '\\': e = "\\\\"; break;
            case '\n': e = "\\n"; break;
            case '\r': e = "\\r"; break;
            case '\t': e = "\\t"; break;
            case '\b': e = "\\b"; break;
            case '\f': e = "\\f"; break;
            }
            if (e)
                wput(h, e, 2);
            else if (b < 0x20 || b == 0x7F)
                put_esc(h, b);
            else
                wput(h, (const char *)&b, 1);
            i++;
            continue;
        }
        uint32_t need, lo = 0x80, hi = 0xBF, cp;
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1; cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2; cp = b & 0x0F;
            if (b == 0xE0)
                lo = 0xA0;
            else if (b == 0xED)
                hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3; cp = b & 0x07;
            if (b == 0xF0)
                lo = 0x90;
            else if (b == 0xF4)
                hi = 0x8F;
        } else {
            put_esc(h, 0xFFFD);             /* not a first byte */
            i++;
            continue;
        }
        uint32_t t = 1;
        for (; t <= need; t++) {
            if (i + t >= m)
                break;
            uint8_t c = s[i + t];
            if (c < (t == 1 ? lo : 0x80) || c > (t == 1 ? hi : 0xBF))
                break;
            cp = cp << 6 | (c & 0x3F);
        }
        if (t <= need) {
            put_esc(h, 0xFFFD);             /* the good part of a bad sequence */
            i += t;
        } else {
            put_esc(h, cp);
            i += need + 1;
        }
    }
    if (cut)
        wput(h, "...", 3);
    wput(h, "\"", 1);
}

static void string_missing(graphc_t *h)
{
    wput(h, ",\n\"string\"", 10);
}

static void string_text(graphc_t *h, uint32_t k, const uint8_t *p, uint32_t got)
{
    const struct graphc_layout *L = &h->L;
    uint32_t len = (uint32_t)get(p + L->str_len, 4);
    uint32_t m = len < h->max_string ? len : h->max_string;
    if ((uint64_t)L->str_size + len + 1 > h->sizes[k] || L->str_size + m > got)
        string_missing(h);                  /* not the walk's string */
    else
        json_text(h, p + L->str_size, m, len > h->max_string);
}

/* The strings' texts as requests, in node order, from the object at index
   `from` on: each read is written (",\n" and its text cut at max_string
   bytes, "..." after; "string" when it cannot be read).  A string held in
   place is written at once; from the first that is not, the requests are
   kept until the next string held in place, whose index is returned: the
   caller reads those kept (graphc_plan, graphc_feed) and goes on from
   there, so the texts stay in node order.  The number of objects once all
   are asked for, -1 out of memory. */
int64_t graphc_snap_strings(graphc_t *h, uint32_t max_string, uint64_t from)
{
    h->strings = 1;
    h->max_string = max_string;
    for (uint64_t k = from; k < h->n; k++)
        if (h->gcts[k] == GCT_STR) {
            uint64_t len = (uint64_t)h->L.str_size + max_string;
            if (len > h->sizes[k])
                len = h->sizes[k];
            if (h->nreq > h->head && in_place(h, h->addrs[k], (uint32_t)len))
                return (int64_t)k;
            if (add_req(h, h->addrs[k], (uint32_t)len, (uint32_t)k, K_STR, 0))
                return -1;
        }
    return (int64_t)h->n;
}
