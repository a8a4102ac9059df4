-- A program that counts, for the tests of lprofile's safety: whatever a
-- profile does to the process, it must go on counting after the debugger
-- is gone.
-- Usage: host counter.lua EXPECTED_FILE MODE [SECONDS]
--   busy: count in a Lua loop for ever; after each 2^22 counts rewrite the
--         file with "pid<TAB>PID", "count<TAB>N" and "ready".  Calls
--         ljgdb_stop() once first (a test under gdb stops there).
--   exit: the same until SECONDS of CPU time (os.clock) have passed, then
--         exit with status 0.
local ffi = require("ffi")
ffi.cdef("int getpid(void);")
local path, mode, seconds = arg[1], arg[2], tonumber(arg[3] or "0")
local pid = ffi.C.getpid()
local n = 0
local function save()
  local f = assert(io.open(path .. ".tmp", "w"))
  f:write("pid\t", pid, "\ncount\t", n, "\nready\n")
  f:close()
  os.rename(path .. ".tmp", path)
end
if ljgdb_stop then ljgdb_stop() end
while true do
  for _ = 1, 4194304 do n = n + 1 end
  save()
  if mode == "exit" and os.clock() >= seconds then os.exit(0) end
end
