/* memcount: count the C heap's live bytes and their peak, for any program, by LD_PRELOAD.
 *
 * Both NumPy (every array's data: PyDataMem -> malloc/calloc/realloc) and PyTorch on CPU (c10's
 * alloc_cpu -> posix_memalign) get tensor memory from the C library's allocator, so counting at that
 * one door measures both frameworks the same way: minigrad's pool segments (NumPy arenas), NumPy
 * temporaries inside ops and PyTorch's tensors alike. Each allocation is counted at malloc_usable_size
 * (what the C library really set aside for it). Python's small objects (pymalloc arenas, mmap'd directly)
 * are not counted. benchmarks/eight_gb.py builds this file with cc and reads the counters with ctypes:
 *     memcount_live(), memcount_peak(), memcount_reset_peak()
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

static long live, peak;
static char bootstrap[1 << 16];          /* dlsym may calloc before the real functions are known */
static size_t bootstrap_used;
static int resolving;

static void resolve(void) {
    if (real_malloc || resolving) return;
    resolving = 1;
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
    resolving = 0;
}

static int from_bootstrap(void *p) { return (char *)p >= bootstrap && (char *)p < bootstrap + sizeof bootstrap; }

static void add(void *p) {
    if (!p) return;
    long n = (long)malloc_usable_size(p);
    long now = __atomic_add_fetch(&live, n, __ATOMIC_RELAXED);
    long old = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (now > old && !__atomic_compare_exchange_n(&peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

static void sub(void *p) {
    if (p && !from_bootstrap(p)) __atomic_sub_fetch(&live, (long)malloc_usable_size(p), __ATOMIC_RELAXED);
}

static void *bootstrap_alloc(size_t n) {
    size_t at = (bootstrap_used + 15) & ~(size_t)15;
    if (at + n > sizeof bootstrap) return NULL;
    bootstrap_used = at + n;
    return bootstrap + at;
}

void *malloc(size_t n) {
    resolve();
    if (!real_malloc) return bootstrap_alloc(n);
    void *p = real_malloc(n);
    add(p);
    return p;
}

void *calloc(size_t k, size_t n) {
    resolve();
    if (!real_calloc) { void *p = bootstrap_alloc(k * n); if (p) memset(p, 0, k * n); return p; }
    void *p = real_calloc(k, n);
    add(p);
    return p;
}

void free(void *p) {
    if (!p || from_bootstrap(p)) return;
    resolve();
    sub(p);
    real_free(p);
}

void *realloc(void *p, size_t n) {
    resolve();
    if (from_bootstrap(p)) { void *q = malloc(n); if (q && p) memcpy(q, p, n); return q; }
    sub(p);
    void *q = real_realloc(p, n);
    if (q) add(q);
    else if (p && n) add(p);             /* realloc failed: p is still live */
    return q;
}

int posix_memalign(void **out, size_t align, size_t n) {
    resolve();
    int r = real_posix_memalign(out, align, n);
    if (r == 0) add(*out);
    return r;
}

void *aligned_alloc(size_t align, size_t n) { resolve(); void *p = real_aligned_alloc(align, n); add(p); return p; }
void *memalign(size_t align, size_t n) { resolve(); void *p = real_memalign(align, n); add(p); return p; }

long memcount_live(void) { return __atomic_load_n(&live, __ATOMIC_RELAXED); }
long memcount_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
void memcount_reset_peak(void) { __atomic_store_n(&peak, __atomic_load_n(&live, __ATOMIC_RELAXED), __ATOMIC_RELAXED); }
