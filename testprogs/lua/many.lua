-- Many coroutines, as a server keeps them (one per entity or request), in a
-- few known shapes, for lthreads / lbt --all / --group at scale.
--
-- Usage: host many.lua EXPECTED_FILE N [wait]
--   N coroutines: 70% suspended in coroutine.yield inside wait() called by
--   handle(), 20% suspended in a different place (poll()), 5% never
--   started, 5% dead; then the main thread stops in ljgdb_stop.
-- Records (tab-separated):
--   shape  NAME  COUNT  STATUS             how many coroutines of each shape,
--                                          with coroutine.status
--   frame  NAME  LEVEL  SOURCE  LINE  WHAT  NAMEWHAT  FNAME  LINEDEFINED
--                                          the Lua frames of that shape,
--                                          innermost first (debug.getinfo
--                                          of one coroutine of it)
--   main   THREAD                          the main thread
-- wait: after the stop, append "ready" to the file and block in pause(2)
-- until killed (for python3 -m ljgdb --pid PID, which needs no breakpoint).
local out = assert(io.open(arg[1], "w"))
local n = tonumber(arg[2]) or 100000
local function rec(...) out:write(table.concat({...}, "\t"), "\n") end

local function wait(id) local v = coroutine.yield(id); return v end
local function handle(id) local r = wait(id); return r + 1 end
local function poll(id) local v = coroutine.yield(-id); return v end
local function loop(id) while true do local r = poll(id); if r then return r end end end

local keep = {}
local counts = {handle = 0, poll = 0, fresh = 0, dead = 0}
local first = {}
for i = 1, n do
  local k = i % 20
  local co, shape
  if k < 14 then
    co, shape = coroutine.create(handle), "handle"
    coroutine.resume(co, i)
  elseif k < 18 then
    co, shape = coroutine.create(loop), "poll"
    coroutine.resume(co, i)
  elseif k < 19 then
    co, shape = coroutine.create(handle), "fresh"
  else
    co, shape = coroutine.create(function() return i end), "dead"
    coroutine.resume(co)
  end
  keep[i] = co
  counts[shape] = counts[shape] + 1
  first[shape] = first[shape] or co
end
for shape, co in pairs(first) do
  rec("shape", shape, counts[shape], coroutine.status(co))
  local level = 0
  while true do
    local info = debug.getinfo(co, level, "Sln")
    if not info then break end
    if info.what ~= "C" then
      rec("frame", shape, level, info.source, info.currentline, info.what, info.namewhat,
          info.name or "", info.linedefined)
    end
    level = level + 1
  end
end
rec("main", tostring(coroutine.running()))
out:close()
ljgdb_stop()
if arg[3] == "wait" then
  local ffi = require("ffi")
  ffi.cdef("int pause(void);")
  local f = assert(io.open(arg[1], "a"))
  f:write("ready\n")
  f:close()
  while true do ffi.C.pause() end
end
