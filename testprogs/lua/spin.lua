-- Runs Lua code without stopping (for tests of a process that is running
-- while gdb looks at it), for at most arg[2] seconds (default 60).
-- Usage: host spin.lua EXPECTED_FILE [SECONDS]
local out = assert(io.open(arg[1], "w"))
out:write("spinning\n")
out:close()
local limit = tonumber(arg[2]) or 60
local t = {}
local i = 0
local start = os.time()
while os.time() - start < limit do
  for _ = 1, 100000 do
    i = i + 1
    t[i % 100] = i
  end
end
