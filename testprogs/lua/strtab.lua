-- The string table under hash flooding, for lstr.  Makes N strings of 64
-- bytes that differ only in bytes 4..13, which LuaJIT's primary string hash
-- does not read (R lj_str.c hash_sparse reads 4 bytes at 0, 15, 30 and 60:
-- at the start, a quarter in, the middle and the end), so they all have the
-- same primary hash; keeps them, records them, and stops.
-- Records:
--   flood N                 how many were made
--   str TEXT                each of them
-- Usage: host strtab.lua EXPECTED_FILE [N]
local out = assert(io.open(arg[1], "w"))
local n = tonumber(arg[2]) or 300
local keep = {}
for i = 1, n do
  local s = "AAAA" .. string.format("%010d", i) .. string.rep("x", 50)
  assert(#s == 64)
  keep[i] = s
end
out:write("flood\t", n, "\n")
for i = 1, n do out:write("str\t", keep[i], "\n") end
out:close()
ljgdb_stop(#keep)
