-- For lmalloc: fragments glibc's heap (many allocations of many sizes,
-- most freed, every tenth kept; small chunks freed past tcache into the
-- fastbins; a thread's own arena; a chunk mmapped on its own), then writes
-- glibc's own report of every arena (malloc_info) to EXPECTED_FILE.xml and
-- stops.  Nothing between the report and the stop calls malloc or free.
-- Usage: host malloc.lua EXPECTED_FILE
local ffi = require("ffi")
ffi.cdef[[
void *malloc(size_t n);
void free(void *p);
typedef struct ljgdb_FILE ljgdb_FILE;
ljgdb_FILE *fopen(const char *path, const char *mode);
int fclose(ljgdb_FILE *f);
int fflush(ljgdb_FILE *f);
int setvbuf(ljgdb_FILE *f, char *buf, int mode, size_t size);
int malloc_info(int options, ljgdb_FILE *f);
typedef unsigned long ljgdb_pthread_t;
int pthread_create(ljgdb_pthread_t *t, const void *attr, void *(*fn)(void *), void *arg);
int pthread_join(ljgdb_pthread_t t, void **ret);
]]
local C = ffi.C
local path = arg[1]
local out = assert(io.open(path, "w"))
out:write("xml\t", path, ".xml\n")
out:close()

-- A thread whose start routine is malloc itself (its argument the size):
-- its first allocation makes an arena of its own, which stays after it.
local sizes = {40000, 300}
for _, n in ipairs(sizes) do
  local t = ffi.new("ljgdb_pthread_t[1]")
  local mallocfn = ffi.cast("void *(*)(void *)", ffi.cast("void *", C.malloc))
  assert(C.pthread_create(t, nil, mallocfn, ffi.cast("void *", n)) == 0)
  assert(C.pthread_join(t[0], nil) == 0)
end

local kept = {}
local ptrs = {}
for i = 1, 3000 do ptrs[i] = C.malloc(16 + (i * 37) % 3000) end
for i = 1, 3000 do
  if i % 10 ~= 0 then C.free(ptrs[i]) else kept[#kept + 1] = ptrs[i] end
end
-- (Before the frees into the fastbins: a large request consolidates them.)
local big = C.malloc(300000)
local small = {}
for i = 1, 200 do small[i] = C.malloc(24) end
for i = 1, 200, 2 do C.free(small[i]) end

-- glibc's report, through a buffer that is not malloc's (ffi.new: LuaJIT's
-- own allocator), so that writing it allocates nothing.
local buf = ffi.new("char[?]", 1048576)
local f = C.fopen(path .. ".xml", "w")
assert(C.setvbuf(f, buf, 0, 1048576) == 0)       -- _IOFBF
assert(C.malloc_info(0, f) == 0)
C.fflush(f)                 -- (fclose would free the FILE: after the stop)
ljgdb_stop(kept, small, big)
C.fclose(f)
