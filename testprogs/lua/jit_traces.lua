-- JIT traces and machine-code areas for lmcode/ltrace.  The program
-- records, with LuaJIT's own jit.util and jit.attach, every live trace
-- (number, jit.util.traceinfo fields, jit.util.tracemc address/size/loop,
-- start chunk:line, parent/exit of side traces) and the JIT parameters it
-- set, then stops in ljgdb_stop(addr, traceno): addr is an address inside
-- the machine code of trace traceno (for `lmcode <addr>` / `ltrace N`).
-- Usage: host jit_traces.lua EXPECTED_FILE SCENARIO
--   main   root traces, side traces, loops, recursion, several small mcode
--          areas; an earlier jit.flush() empties everything first
--   flush  builds traces, then jit.flush(): no trace and no area remain
-- On a build without the JIT (no jit.util/jit.opt) it records "nojit" and
-- stops at once.
local out = assert(io.open(arg[1], "w"))
local scenario = arg[2] or "main"

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
  out:flush()
end

if not (type(jit) == "table" and jit.util and jit.opt) then
  local ok, util = pcall(require, "jit.util")
  if not ok or not jit or not jit.opt then
    rec("nojit", type(jit) == "table" and jit.version or "no jit module")
    ljgdb_stop()
    return
  end
end
local util = jit.util or require("jit.util")

-- Small areas so that several are needed: 4 KB is the smallest useful size
-- (upstream 2.1 rounds sizemcode up to whole pages in jit.opt.start, 2.0 and
-- the 2.1 snapshots round each area to pages in mcode_allocarea).
-- arm64: upstream 2.1's LJ_PAGESIZE is 16 KB there (lj_arch.h), so its
-- areas are 16 KB at least; 16 KB for both arm64 builds, and four times the
-- loops to fill more than one.
local SIZEMCODE, MAXMCODE = 4, 256
if jit.arch == "arm64" then SIZEMCODE = 16 end
jit.opt.start("sizemcode=" .. SIZEMCODE, "maxmcode=" .. MAXMCODE, "hotloop=8", "hotexit=4")
rec("param", SIZEMCODE, MAXMCODE)

-- Start site, parent and exit of every trace, from the VM's trace events
-- (the same data jit.dump prints as "TRACE n start parent/exit file:line").
local starts = {}
jit.attach(function(what, tr, func, pc, otr, oex)
  if what == "start" then
    local fi = util.funcinfo(func, pc)
    starts[tr] = {fi.source or "?", fi.currentline or -1, otr or 0,
                  oex == -1 and "stitch" or (oex or -1)}
  elseif what == "flush" then
    starts = {}
  end
end, "trace")

local function branchy(n)
  local a, b = 0, 0
  for i = 1, n do
    if i % 4 == 0 then a = a + i else b = b + 1 end   -- the side exit
  end
  return a + b
end

local function nested(n)
  local s = 0
  for i = 1, n do
    for j = 1, 20 do s = s + i * j end
    if i % 3 == 0 then s = s - 1 end
  end
  return s
end

local function tailrec(n, acc)
  if n == 0 then return acc end
  return tailrec(n - 1, acc + 1)
end

local function fib(n)
  if n < 2 then return n end
  return fib(n - 1) + fib(n - 2)
end

-- Thirty distinct loops per 4 KB of sizemcode (their own prototypes, each
-- a root trace of a few hundred bytes): together more than fit in one area.
local function many_loops(prefix)
  local src = {}
  for k = 1, 30 * SIZEMCODE / 4 do
    src[#src + 1] = ([[
local function f%d(t, n)
  local s = 0
  for i = 1, n do s = s + t[(i %% #t) + 1] * %d + i / %d end
  return s
end
R[%d] = f%d({1, 2, 3, 4, 5}, 300)
KEEP[#KEEP + 1] = f%d
]]):format(k, k, k + 1, k, k, k)
  end
  -- (KEEP holds the functions: a collected prototype takes its traces
  -- with it, between the listing of the traces and their recording.)
  R, KEEP = {}, {}
  assert(loadstring(table.concat(src), "=" .. prefix))()
end

local function live_traces()
  local n, count = 1, 0
  local list = {}
  -- Trace numbers are dense from 1 after a flush; stop after a long gap.
  local gap = 0
  while gap < 200 do
    local info = util.traceinfo(n)
    if info then
      gap = 0
      list[#list + 1] = n
    else
      gap = gap + 1
    end
    n = n + 1
  end
  return list
end

local function record_traces()
  local list = live_traces()
  for _, n in ipairs(list) do
    local info = util.traceinfo(n)
    local mc, addr, loop = util.tracemc(n)
    local s = starts[n] or {"?", -1, 0, -1}
    rec("trace", n, info.nins, info.nk, info.link, info.nexit, info.linktype,
        string.format("%.0f", addr), #mc, loop, s[1], s[2], s[3], s[4])
  end
  rec("ntraces", #list)
  return list
end

-- Phase 1: some traces, then a flush that frees them and every mcode area.
branchy(500)
many_loops("before_flush")
jit.flush()

-- The recording loops below must not become traces themselves.
if scenario == "flush" then
  jit.off()
  record_traces()
  ljgdb_stop()
  return
end

-- Phase 2: root traces, side traces, loops, recursion.
branchy(2000)
nested(300)
tailrec(500, 0)
fib(20)
many_loops("loops")
jit.off()
local list = record_traces()

-- An address inside the machine code of a side trace (else the first trace).
local pick = list[1]
for _, n in ipairs(list) do
  local s = starts[n]
  if s and type(s[4]) == "number" and s[4] >= 0 and s[3] ~= 0 then pick = n; break end
end
local mc, addr = util.tracemc(pick)
local inside = addr + math.floor(#mc / 2)
rec("addr", string.format("%.0f", inside), pick)
-- (pick + 0.5: a double in dual-number builds too, which keep integers as
-- integer TValues; the tests read the slot as a double and cut it.)
ljgdb_stop(inside, pick + 0.5)
