-- A program that stands still deep in its stack, for the tests of the live
-- backend (python3 -m ljgdb --pid): Lua frames in a coroutine over the main
-- chunk, and at the top a read of a FIFO that blocks in the C library until
-- the test writes a line into it.  Other coroutines wait suspended.
-- Usage: host wait.lua EXPECTED_FILE FIFO
-- Records (tab-separated): "pid PID" and "ready" before the first read;
-- then "line TEXT" for each line read, going back to the same read after
-- each; the line "quit" ends the program ("done", exit status 0).
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local out = assert(io.open(arg[1], "w"))
-- (Read-write: the open does not wait for a writer, and no end of file comes.)
local fifo = assert(io.open(arg[2], "r+"))

local function rec(...)
  out:write(table.concat({...}, "\t"), "\n")
  out:flush()
end

local waiting = {}
for i = 1, 3 do
  local co = coroutine.create(function(x) local y = coroutine.yield(x * 2); return y end)
  assert(coroutine.resume(co, i))
  waiting[i] = co
end

local function wait_line(tag)
  local line = fifo:read("*l")
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
    local line = deep(5, "d")
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
