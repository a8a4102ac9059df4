-- A program that counts, for the tests of lprofile's safety: whatever a
-- profile does to the process, it must go on counting after the debugger
-- is gone.
-- Usage: host counter.lua EXPECTED_FILE MODE [SECONDS]
--   busy: count in a Lua loop for ever; after each 2^22 counts rewrite the
--         file with "pid<TAB>PID", "count<TAB>N" and "ready".  Calls
--         ljgdb_stop() once first (a test under gdb stops there).
--   exit: the same until SECONDS of CPU time (os.clock) have passed, then
--         exit with status 0.
--   threads: the same, and every 2^16 counts starts an OS thread that
--         sleeps 100 us in usleep (C, no Lua) and joins the one before:
--         threads are born and end all the time.
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
if mode == "threads" then
  ffi.cdef[[
  typedef unsigned long ljgdb_pthread_t;
  int pthread_create(ljgdb_pthread_t *t, const void *attr, void *(*fn)(void *), void *arg);
  int pthread_join(ljgdb_pthread_t t, void **ret);
  int usleep(unsigned int us);
  ]]
  -- usleep(100) as a thread's start routine (its argument is the time).
  local sleeper = ffi.cast("void *(*)(void *)", ffi.cast("void *", ffi.C.usleep))
  local prev = nil
  while true do
    for _ = 1, 64 do
      for _ = 1, 65536 do n = n + 1 end
      local t = ffi.new("ljgdb_pthread_t[1]")
      assert(ffi.C.pthread_create(t, nil, sleeper, ffi.cast("void *", 100)) == 0)
      if prev then ffi.C.pthread_join(prev[0], nil) end
      prev = t
    end
    save()
  end
end
while true do
  for _ = 1, 4194304 do n = n + 1 end
  save()
  if mode == "exit" and os.clock() >= seconds then os.exit(0) end
end
