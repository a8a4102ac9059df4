/*
 * ljgdb test host: runs a Lua script in a LuaJIT state and gives it a few C
 * functions, so that tests can stop the process at a known moment.
 *
 *   host SCRIPT [ARG...]
 *
 * Globals given to the script:
 *   ljgdb_stop(...)      calls ljgdb_break(L, nargs); tests put a breakpoint on
 *                        ljgdb_break, so the stop happens in a C function
 *                        called from Lua, with the Lua frames above it.  The
 *                        last coroutine among the arguments is stored in the
 *                        C global ljgdb_thread (tests use L=ljgdb_thread).
 *   ljgdb_ccall(f, ...)  calls f(...) from C with lua_call (C -> Lua nesting).
 *   ljgdb_lightud(n)     a light userdata whose pointer is the number n.
 * C functions for the FFI (ffi.C.*):
 *   ljgdb_ffi_stop()     calls ljgdb_break(main L, 0)
 *   ljgdb_call_cb(cb, v) calls the callback cb(v)
 *   ljgdb_ffi_tick(i, n) calls ljgdb_break(main L, 0) when i == n
 *   arg                  the script's arguments, as in the luajit binary.
 *
 * Environment:
 *   LJGDB_STATES=N       make N-1 more Lua states before the script runs
 *                        (each fills a table and stays alive, idle); the C
 *                        array ljgdb_states holds them, the script's first
 *   LJGDB_IDLE=1         after the script returns: append to the file named
 *                        by the first script argument the main lua_State of
 *                        every state and its g->gc.total (from lua_gc), as
 *                        "state<TAB>L<TAB>total", the script's state first;
 *                        then stop in ljgdb_break(NULL, -1) in an OS thread
 *                        of its own (no Lua state in its frames) while the
 *                        main thread waits in C with every VM idle.
 *   LJGDB_SELF_STOP=1    in ljgdb_break: stop the process with SIGSTOP, so
 *                        that debuggers can attach one after another to
 *                        one moment (tests/e2e/test_lldb.py).
 *   LJGDB_FORK_CORE=1    in ljgdb_break, after the debugger's stop: fork a
 *                        child that aborts (its core is the stop's memory;
 *                        for the arm64 tests under qemu-user) and wait for it.
 *   LJGDB_SYSALLOC=1     make the script's state with lua_newstate and an
 *                        allocator of the host's own (the C library's
 *                        realloc), not luaL_newstate (GC64 builds only:
 *                        others refuse an allocator of the host's).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

/* Breakpoint target.  Kept out of line and given an observable effect. */
volatile int ljgdb_break_count;
/* The last coroutine passed to ljgdb_stop, for tests of L=<expr>. */
lua_State *ljgdb_thread;
/* The main lua_State, for stops that come through the FFI. */
lua_State *ljgdb_main_L;

__attribute__((noinline)) void ljgdb_break(lua_State *L, int nargs)
{
  ljgdb_break_count++;
  (void)L;
  (void)nargs;
  __asm__ volatile("" ::: "memory");
  if (getenv("LJGDB_SELF_STOP"))
    kill(getpid(), SIGSTOP);
  /* Under qemu-user, whose gdb stub cannot write a core of a live process,
     the tests take the core of each stop from a child that aborts: forked
     after the debugger let the stop go on, its memory is the stop's. */
  if (getenv("LJGDB_FORK_CORE")) {
    pid_t pid = fork();
    if (pid == 0)
      abort();
    if (pid > 0)
      waitpid(pid, NULL, 0);
  }
}

static int ljgdb_stop(lua_State *L)
{
  int i;
  for (i = 1; i <= lua_gettop(L); i++)
    if (lua_type(L, i) == LUA_TTHREAD)
      ljgdb_thread = lua_tothread(L, i);
  ljgdb_break(L, lua_gettop(L));
  return 0;
}

/* For the FFI (found through -Wl,-E): stop without a Lua C function. */
void ljgdb_ffi_stop(void)
{
  ljgdb_break(ljgdb_main_L, 0);
}

/* For the FFI, called on every iteration of a hot loop so that the call is
   compiled into the trace: stops on the last one. */
void ljgdb_ffi_tick(int i, int n)
{
  if (i == n)
    ljgdb_break(ljgdb_main_L, 0);
}

/* For the FFI: call a callback made with ffi.cast (C -> Lua via FFI). */
void ljgdb_call_cb(void (*cb)(int), int v)
{
  cb(v);
}

/* A light userdata holding the given number as a pointer. */
static int ljgdb_lightud(lua_State *L)
{
  lua_pushlightuserdata(L, (void *)(uintptr_t)luaL_checknumber(L, 1));
  return 1;
}

static int ljgdb_ccall(lua_State *L)
{
  int n = lua_gettop(L);
  lua_call(L, n - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* The allocator of LJGDB_SYSALLOC. */
static void *ljgdb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

/* The OS thread of LJGDB_IDLE: C code that knows no Lua state. */
static void *ljgdb_outside(void *arg)
{
  (void)arg;
  /* Let the main thread reach pthread_join first: its frames are then the
     same at every run (not, at times, still in clone3, which has no unwind
     information past its system call). */
  usleep(200000);
  ljgdb_break(NULL, -1);
  return NULL;
}

static long gc_total(lua_State *L)
{
  return (long)lua_gc(L, LUA_GCCOUNT, 0) * 1024 + lua_gc(L, LUA_GCCOUNTB, 0);
}

#define MAX_STATES 8
/* LJGDB_STATES: the script's state first, then the others. */
lua_State *ljgdb_states[MAX_STATES + 1];

int main(int argc, char **argv)
{
  lua_State *L, *extra[MAX_STATES];
  int i, status, nextra = 0;
  const char *states = getenv("LJGDB_STATES");
  if (argc < 2) {
    fprintf(stderr, "usage: %s SCRIPT [ARG...]\n", argv[0]);
    return 2;
  }
  if (states != NULL)
    nextra = atoi(states) - 1;
  for (i = 0; i < nextra && i < MAX_STATES; i++) {
    extra[i] = ljgdb_states[i + 1] = luaL_newstate();
    luaL_openlibs(extra[i]);
    lua_pushinteger(extra[i], 100 * (i + 1));
    lua_setglobal(extra[i], "n");
    if (luaL_dostring(extra[i], "t = {} for i = 1, n do t[i] = tostring(i) end"
                      " for i = 1, 10 do t[-i] = coroutine.create(print) end") != 0) {
      fprintf(stderr, "host: extra state: %s\n", lua_tostring(extra[i], -1));
      return 1;
    }
  }
  L = ljgdb_states[0] = getenv("LJGDB_SYSALLOC") != NULL ? lua_newstate(ljgdb_alloc, NULL)
                                                         : luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "host: cannot create a Lua state\n");
    return 1;
  }
  ljgdb_main_L = L;
  luaL_openlibs(L);
  lua_register(L, "ljgdb_stop", ljgdb_stop);
  lua_register(L, "ljgdb_ccall", ljgdb_ccall);
  lua_register(L, "ljgdb_lightud", ljgdb_lightud);
  lua_createtable(L, argc - 2, 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setglobal(L, "arg");
  status = luaL_loadfile(L, argv[1]);
  if (status == 0)
    status = lua_pcall(L, 0, 0, 0);
  if (status != 0) {
    fprintf(stderr, "host: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  if (getenv("LJGDB_IDLE") != NULL && argc > 2) {
    pthread_t outside;
    FILE *f = fopen(argv[2], "a");
    if (f == NULL) {
      perror(argv[2]);
      return 1;
    }
    fprintf(f, "state\t%p\t%ld\n", (void *)L, gc_total(L));
    for (i = 0; i < nextra && i < MAX_STATES; i++)
      fprintf(f, "state\t%p\t%ld\n", (void *)extra[i], gc_total(extra[i]));
    fclose(f);
    pthread_create(&outside, NULL, ljgdb_outside, NULL);
    pthread_join(outside, NULL);
  }
  for (i = 0; i < nextra && i < MAX_STATES; i++)
    lua_close(extra[i]);
  lua_close(L);
  return 0;
}
