-- A program that stands still deep in its stack, for the tests of the live
-- backend (python3 -m ljgdb --pid, dump --pid): Lua frames in a coroutine
-- over the main chunk, and at the top a read of a FIFO that blocks in the C
-- library until the test writes a line into it.  Other coroutines wait
-- suspended.
-- Usage: host wait.lua EXPECTED_FILE FIFO [DEPTH [idle-thread]]
-- DEPTH: the levels of recursion of deep() under the read (default 5;
-- bench/bench_dump.py takes 200).  idle-thread: also start an OS thread
-- named "ljgdb-idle" that runs no Lua (it sleeps in pause(2)).
-- Records (tab-separated): "pid PID" and "ready" before the first read;
-- before each read, the coroutine's frames as debug.getinfo sees them from
-- the line of the read, "frame LEVEL SOURCE LINE" (level 1: wait_line, the
-- frame lbt numbers #1 under the read's builtin #0), then "frames N";
-- then "line TEXT" for each line read, going back to the same read after
-- each; the line "quit" ends the program ("done", exit status 0).
local ffi = require("ffi")
ffi.cdef[[
int getpid(void);
int pause(void);
int pthread_create(unsigned long *thread, const void *attr, void *(*start)(void *), void *arg);
int pthread_setname_np(unsigned long thread, const char *name);
]]
local out = assert(io.open(arg[1], "w"))
-- (Read-write: the open does not wait for a writer, and no end of file comes.)
local fifo = assert(io.open(arg[2], "r+"))

local depth = tonumber(arg[3] or 5)

local function rec(...)
  out:write(table.concat({...}, "\t"), "\n")
  out:flush()
end

if arg[4] == "idle-thread" then
  local th = ffi.new("unsigned long[1]")
  assert(ffi.C.pthread_create(th, nil, ffi.cast("void *(*)(void *)", ffi.C.pause), nil) == 0)
  ffi.C.pthread_setname_np(th[0], "ljgdb-idle")
end

-- The frames of the caller and up, as they are at the caller's line.
local function record_frames()
  local level = 2
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    rec("frame", level - 1, info.source, info.currentline)
    level = level + 1
  end
  rec("frames", level - 2)
end

local waiting = {}
for i = 1, 3 do
  local co = coroutine.create(function(x) local y = coroutine.yield(x * 2); return y end)
  assert(coroutine.resume(co, i))
  waiting[i] = co
end

local function wait_line(tag)
  record_frames(); local line = fifo:read("*l")       -- (one line: the read's)
  return line, tag
end

local function deep(n, tag)
  if n == 0 then
    local line = wait_line(tag)
    return line
  end
  local line = deep(n - 1, tag .. n)       -- (not a tail call: every frame stays)
  return line
end

local worker = coroutine.create(function()
  while true do
    local line = deep(depth, "d")
    rec("line", line)
    if line == "quit" then return end
    coroutine.yield(#line)
  end
end)

rec("pid", ffi.C.getpid())
rec("ready")
repeat
  assert(coroutine.resume(worker))
until coroutine.status(worker) == "dead"
rec("done", #waiting)
