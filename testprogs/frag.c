/* For lmalloc on a process without LuaJIT: a plain C program that
 * fragments glibc's heap as testprogs/lua/malloc.lua does (many blocks of
 * many sizes, most freed; small ones freed past the tcache into the
 * fastbins; two threads' own arenas; a chunk mmapped on its own), writes
 * glibc's own report of every arena (malloc_info) to REPORT, then stops.
 * Nothing between the report and the stop calls malloc or free: the
 * report's stdio buffer is a static array.
 *
 * Usage: frag REPORT          stops in frag_stop() (a debugger's breakpoint)
 *        frag REPORT wait     writes REPORT.ready, then waits in pause()
 *                             (for ljgdb --pid) */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char report_buf[1 << 20];
static void *ptrs[3000], *small[200];
void *volatile frag_keep;

__attribute__((noinline)) void frag_stop(void)
{
    __asm__ volatile("" ::: "memory");
}

/* A thread's first allocation makes an arena of its own, which stays. */
static void *alloc(void *n)
{
    return malloc((size_t)n);
}

int main(int argc, char **argv)
{
    static const size_t sizes[] = {40000, 300};
    char ready[4096];
    FILE *f;
    int i;

    if (argc < 2)
        return 2;
    for (i = 0; i < 2; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, alloc, (void *)sizes[i]) != 0 || pthread_join(t, NULL) != 0)
            return 1;
    }
    for (i = 1; i <= 3000; i++)
        ptrs[i - 1] = malloc(16 + (i * 37) % 3000);
    for (i = 1; i <= 3000; i++)
        if (i % 10 != 0)
            free(ptrs[i - 1]);
    /* (Before the frees into the fastbins: a large request consolidates them.) */
    frag_keep = malloc(300000);
    for (i = 0; i < 200; i++)
        small[i] = malloc(24);
    for (i = 0; i < 200; i += 2)
        free(small[i]);
    snprintf(ready, sizeof ready, "%s.ready", argv[1]);
    f = fopen(argv[1], "w");
    if (f == NULL || setvbuf(f, report_buf, _IOFBF, sizeof report_buf) != 0 ||
        malloc_info(0, f) != 0)
        return 1;
    fflush(f);
    if (argc > 2 && strcmp(argv[2], "wait") == 0) {
        int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            return 1;
        close(fd);
        for (;;)
            pause();
    }
    frag_stop();
    fclose(f);
    return 0;
}
