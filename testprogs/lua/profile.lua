-- Workloads for lprofile, each running until killed, each measuring itself
-- so a test can compare the profile's shares with the program's own.
-- Usage: host profile.lua EXPECTED_FILE MODE
--   busy-interp, busy-jit: functions f1, f2, f5 burn CPU in the ratio
--     1:2:5 (each a loop of its own); the file holds the CPU seconds
--     (os.clock) spent in each so far, rewritten every 100 rounds.
--   pipe: work() burns CPU, then a read of an io.popen pipe blocks; the
--     file holds the wall-clock seconds spent in each.
--   syscall: sysc() calls os.clock in a loop (clock_gettime of the process
--     CPU clock, a system call that keeps the thread on a CPU) for 3/8 of
--     the CPU time, whatever a call costs; interp() loops in the interpreter
--     (jit.off), jitted() runs the same loop JIT-compiled; the file holds
--     the CPU and the wall seconds spent in each.
--   files: opens and closes /dev/null for ever (record --native's test).
local ffi = require("ffi")
ffi.cdef[[
struct ljgdb_ts { long sec; long nsec; };
int clock_gettime(int clk, struct ljgdb_ts *ts);
]]
local path, mode = arg[1], arg[2]
local ts = ffi.new("struct ljgdb_ts")
local function now()
  ffi.C.clock_gettime(1, ts)     -- CLOCK_MONOTONIC
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end

-- The lines the profile's stacks name (filled in below, from LuaJIT).
local lines = {}
-- The name each measured function is called by, as LuaJIT's debug.getinfo
-- gives it ("namewhat<TAB>name"; both empty without a name), noted at its
-- first call once the measured loop runs (setup calls are left out).
local names = {}
local measuring = false
local function note(key)
  if measuring and not names[key] then
    local info = debug.getinfo(2, "n")
    names[key] = info.namewhat .. "\t" .. (info.name or "")
  end
end

local function save(fields)
  local f = assert(io.open(path .. ".tmp", "w"))
  for k, v in pairs(fields) do f:write("time\t", k, "\t", string.format("%.6f", v), "\n") end
  for k, v in pairs(lines) do f:write("line\t", k, "\t", v, "\n") end
  for k, v in pairs(names) do f:write("name\t", k, "\t", v, "\n") end
  f:close()
  os.rename(path .. ".tmp", path)
end

local N = 20000
local function spin(n)
  local x = 0; note("spin")
  for i = 1, n do x = (x + i * 7) % 1000003 end
  return x
end
-- (Not tail calls: each keeps its own frame.)
function f1() note("f1"); local x = spin(N); return x end
function f2() note("f2"); local x = spin(2 * N); return x end
function f5() note("f5"); local x = spin(5 * N); return x end
-- spin's loop, and the line of each f's call of spin (each f is one line).
lines.spin = debug.getinfo(spin, "S").linedefined + 2
for _, name in ipairs({"f1", "f2", "f5"}) do
  lines[name] = debug.getinfo(_G[name], "S").linedefined
end

-- Runs the parts ({name, function} each) in turn for ever, adding the CPU
-- seconds (os.clock) each takes to its total, and its wall seconds to
-- "wall NAME"'s; the file gets the totals every `every` rounds.
local function measure(parts, every)
  local t = {}
  for _, p in ipairs(parts) do t[p[1]] = 0 end
  ljgdb_stop()
  measuring = true
  local rounds = 0
  while true do
    for _, p in ipairs(parts) do
      local c0, w0, w = os.clock(), now(), "wall " .. p[1]; p[2]()
      t[p[1]], t[w] = t[p[1]] + os.clock() - c0, (t[w] or 0) + now() - w0
    end
    rounds = rounds + 1
    if rounds % every == 0 then save(t) end
  end
end

if mode == "busy-interp" or mode == "busy-jit" then
  if mode == "busy-interp" then jit.off() end
  measure({{"f1", f1}, {"f2", f2}, {"f5", f5}}, 100)
elseif mode == "syscall" then
  local goal
  local function sysc() note("sysc"); local c0 = os.clock(); repeat until os.clock() - c0 >= goal end
  local function interp()
    local x = 0; note("interp")
    for i = 1, 4 * N do x = (x + i * 7) % 1000003 end
    return x
  end
  local function jitted()
    local x = 0; note("jitted")
    for i = 1, 20 * N do x = (x + i * 7) % 1000003 end
    return x
  end
  jit.off(interp); local c0 = os.clock(); interp(); jitted(); goal = 0.6 * (os.clock() - c0)
  local parts = {{"sysc", sysc}, {"interp", interp}, {"jitted", jitted}}
  for _, p in ipairs(parts) do lines[p[1]] = debug.getinfo(p[2], "S").linedefined end
  measure(parts, 20)
elseif mode == "pipe" then
  -- One io.popen'ed child writes a line every 20 ms; each round burns CPU
  -- in work(), then reads a line, blocking on the pipe.  The file holds
  -- the wall-clock seconds of each part.  (One child for the whole run:
  -- no fork per round, whose handling under the debugger stops the
  -- process outside any sample.)  A sample stops the process wherever it
  -- lands, so each part's wall time holds the stops of the samples in it:
  -- the shares of the wall time are the shares a sampler must find.
  local function work() note("work"); local x = spin(40 * N); return x end
  local sv = debug.getinfo(save, "S"); lines.work, lines.save, lines.save_end = debug.getinfo(work, "S").linedefined, sv.linedefined, sv.lastlinedefined
  local f = assert(io.popen("while :; do sleep 0.02; echo x; done"))
  local t = {work = 0, read = 0}
  ljgdb_stop()
  measuring = true
  local rounds = 0
  while true do
    local w0 = now(); work()
    local r0 = now()
    local line = f:read("*l")
    local r1 = now()
    t.work, t.read = t.work + r0 - w0, t.read + r1 - r0
    rounds = rounds + 1
    if rounds % 10 == 0 then save(t) end
  end
elseif mode == "files" then
  -- For record --native: opens and closes /dev/null for ever (io.open and
  -- a file's close: lib_io.c's C functions, each ending in a system
  -- call); the file holds the loop's line.
  lines.files = debug.getinfo(1, "l").currentline + 2
  save({})
  while true do local f = assert(io.open("/dev/null")); f:close() end
elseif mode == "coroutines" then
  -- (Below the other modes: their lines are in the docs' examples.)
  -- For record's C stop: 16 coroutines take turns, each spinning a while
  -- then yielding, so the running lua_State (g->cur_L) changes many times
  -- between two samples; the file holds the line of the resume in the
  -- main chunk and of the coroutines' call of spin.
  local cos = {}
  for i = 1, 16 do
    cos[i] = coroutine.create(function()
      while true do spin(N); coroutine.yield() end
    end)
  end
  lines.body = debug.getinfo(1, "l").currentline - 3
  lines.resume = debug.getinfo(1, "l").currentline + 5
  measuring = true
  assert(coroutine.resume(cos[1]))    -- (notes spin's name as the coroutines call it)
  save({})
  while true do
    for i = 1, #cos do assert(coroutine.resume(cos[i])) end
  end
elseif mode == "deep" then
  -- For bench/bench_profile.py: spin at the bottom of DEPTH Lua frames
  -- (arg[3], default 200), writing the wall time and the rounds done so
  -- far every quarter second.
  local depth = tonumber(arg[3]) or 200
  local out = assert(io.open(path, "w"))
  local function down(n)
    if n > 0 then local r = down(n - 1); return r end
    if ljgdb_stop then ljgdb_stop() end
    local rounds, last = 0, now()
    while true do
      spin(N)
      rounds = rounds + 1
      local t = now()
      if t - last >= 0.25 then
        out:write(string.format("%.6f\t%d\n", t, rounds)); out:flush()
        last = t
      end
    end
  end
  down(depth)
elseif mode == "flush" then
  -- For record's decode after the stop: spin's loop runs as a trace, and
  -- every 20 ms jit.flush() frees all machine code (lj_trace_flushall),
  -- so the loop is compiled again; the file holds
  -- the lines of the loop below.
  lines.flush = debug.getinfo(1, "l").currentline + 4
  save({})
  local last = now()
  while true do
    spin(N)
    if now() - last >= 0.02 then jit.flush(); last = now() end
  end
elseif mode == "sleepers" then
  -- For record's reading of thread states: 40 OS threads asleep in
  -- sleep(1000) (started with sleep itself as their start routine, the
  -- seconds as its argument) beside this one, which spins.
  ffi.cdef[[
  typedef unsigned long ljgdb_pthread_t;
  int pthread_create(ljgdb_pthread_t *t, const void *a, void *(*f)(void *), void *arg);
  unsigned int sleep(unsigned int s);
  ]]
  local start = ffi.cast("void *(*)(void *)", ffi.C.sleep)
  for _ = 1, 40 do
    local t = ffi.new("ljgdb_pthread_t[1]")
    assert(ffi.C.pthread_create(t, nil, start, ffi.cast("void *", 1000)) == 0)
  end
  save({})
  while true do spin(N) end
end

error("unknown mode " .. tostring(mode))
