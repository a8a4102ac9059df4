-- What an editor meets in a big process, for bench/bench_dap.py: a Lua
-- stack DEPTH frames deep whose innermost frame holds a table of N entries
-- (N/2 in its array part, N/2 string keys in its hash part), stopped in
-- ljgdb_stop; a core of it is what the DAP server opens.
-- Usage: host dapbench.lua EXPECTED_FILE [DEPTH [N]]
local out = assert(io.open(arg[1], "w"))
local depth = tonumber(arg[2]) or 200
local n = tonumber(arg[3]) or 100000

local function down(k)
  if k == 1 then
    local big = {}
    for i = 1, n / 2 do big[i] = i end
    for i = 1, n / 2 do big["key" .. i] = i end
    out:write("ready\t", depth, "\t", n, "\n")
    out:close()
    ljgdb_stop()
    return big
  end
  local r = down(k - 1)       -- (not a tail call: each level keeps its frame)
  return r
end

down(depth)
