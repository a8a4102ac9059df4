-- References from garbage during a collection cycle, for lgcref: the
-- table _G.keep is referenced by _G and by 200 tables nothing else holds.
-- The program then drives the collector one small step at a time and
-- stops after each step; it records:
--   keep OBJECT        the table
--   holder OBJECT      each garbage table that references it
-- Usage: host sweep.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
collectgarbage("collect")
collectgarbage("stop")
keep = { "kept" }
local holders = {}
for i = 1, 200 do holders[i] = { keep } end
out:write("keep\t", tostring(keep), "\n")
for i = 1, 200 do out:write("holder\t", tostring(holders[i]), "\n") end
out:close()
holders = nil
-- (The collector is stopped: they are garbage no cycle has seen yet.)
for _ = 1, 40 do
  collectgarbage("step", 0)
  ljgdb_stop()
end
