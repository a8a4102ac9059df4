-- For docs/internals.md: a Lua frame calling io.popen (tour.py breaks on
-- the C library's popen to show it).
-- Usage: host popen.lua EXPECTED_FILE
local function run(cmd)
  local f = io.popen(cmd)
  local s = f:read("*a")
  f:close()
  return s
end
io.open(arg[1], "w"):close()
print(run("echo hello"))
