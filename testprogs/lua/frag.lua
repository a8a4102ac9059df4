-- A fragmenting workload for lheap: 2000 empty tables made one after the
-- other, every other one dropped, then full collections.  The freed tables'
-- chunks lie between kept ones and cannot merge.  Records:
--   dropped N     the number of tables dropped
-- Usage: host frag.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local keep = {}
for i = 1, 1000 do keep[i] = false end
collectgarbage("collect")
local drop = {}
for i = 1, 1000 do drop[i] = false end
for i = 1, 1000 do
  drop[i] = {}
  keep[i] = {}
end
drop = nil
collectgarbage("collect")
collectgarbage("collect")
out:write("dropped\t1000\n")
out:close()
ljgdb_stop()
