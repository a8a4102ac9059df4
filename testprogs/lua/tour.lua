-- For docs/internals.md (docs/tour.py runs it under GC64 and X64 builds):
-- the same values in both layouts, then what 1000 coroutines cost.
-- Stop 1: with the collector stopped after a full collection, locals of
-- every kind on the stack (ljgdb_stop's arguments).  Stop 2: after making
-- 1000 coroutines of one empty function, kept in a table made before
-- stop 1.  Records: count BYTES1 BYTES2 (collectgarbage("count") * 1024 at
-- the stops).
-- Usage: host tour.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local keep = {}
for i = 1, 1000 do keep[i] = false end
local ffi = require("ffi")
local f = function() end
local t = { 1, 2, 3, x = "y" }
collectgarbage("collect")
collectgarbage("collect")
collectgarbage("stop")
local c1 = collectgarbage("count")
local co = coroutine.create(f)
local ud = newproxy(false)
local lud = ljgdb_lightud(0x1234)
local cd = ffi.new("int", 7)
ljgdb_stop(nil, true, 42, 0.5, "str", t, f, print, false, co, ud, lud, cd)
for i = 1, 1000 do keep[i] = coroutine.create(f) end
local c2 = collectgarbage("count")
ljgdb_stop()
out:write(string.format("count\t%d\t%d\n", c1 * 1024, c2 * 1024))
out:close()
