-- For docs/internals.md: strings of 1 MB kept in a table until the heap is
-- full ("not enough memory": 2 GB in an X64 build), then a stop.  Records:
--   made N ERROR   how many strings were made, and the error
-- Usage: host oom.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local keep = {}
local base = string.rep("x", 1024 * 1024 - 8)
local ok, err = pcall(function()
  for i = 1, 1000000 do keep[i] = base .. string.format("%08d", i) end
end)
out:write("made\t", #keep, "\t", tostring(err), "\n")
out:close()
ljgdb_stop()
