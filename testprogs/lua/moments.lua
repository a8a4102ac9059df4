-- Stacks known by construction, for stopping the VM at random moments.
-- Each shape builds a stack, records it with LuaJIT's own debug library on
-- the line where it then loops forever (the record and the loop share that
-- line, so every instruction of the loop is at the recorded line), and
-- names the frames that the loop may have above the recorded ones at any
-- moment (a fast function, a C function or a one-line Lua function it
-- calls) with at most how many of each.
-- Usage: host moments.lua EXPECTED_FILE SHAPE
-- Writes "pid", "frame", "allow" and "ffname" records, then "ready".
local ffi = require("ffi")
local out = assert(io.open(arg[1], "w"))
local shape = arg[2]

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
end

do
  local f = assert(io.open("/proc/self/stat"))
  rec("pid", f:read("*l"):match("^(%d+)"))
  f:close()
end
local ok, vmdef = pcall(require, "jit.vmdef")
if ok and vmdef.ffnames then
  for id, name in pairs(vmdef.ffnames) do rec("ffname", id, name) end
end

-- The recorded stack: every level above record_stack's caller, as
-- debug.getinfo sees it, then "ready".  (No tail calls: they would remove
-- frames.)
local function record_stack(co)
  local level = co and 0 or 2
  local n = 0
  while true do
    local info
    if co then info = debug.getinfo(co, level, "Slfn") else info = debug.getinfo(level, "Slfn") end
    if not info then break end
    rec("frame", n, info.what, info.source, info.currentline, tostring(info.func),
        info.namewhat, info.name or "", info.linedefined)
    level = level + 1
    n = n + 1
  end
  rec("ready")
  out:close()
  return 0
end

-- A frame the loop may add on top: a builtin or C function (by its
-- tostring, "builtin#N" or "function: ..."), or a one-line Lua function.
local function allow(f, max)
  local info = debug.getinfo(f, "S")
  if info.what == "Lua" then
    rec("allow", "lua", info.source, info.linedefined, max or 1)
  else
    rec("allow", "c", tostring(f), max or 1)
  end
end

local S = {}
local sink = 0

-- Plain interpreted arithmetic, a few calls deep.
function S.interp()
  jit.off()
  local function c(x) record_stack(); local i = x; while true do i = i + 1; sink = i end end
  local function b(x) local r = c(x + 1); return r end
  local function a() local r = b(1); return r end
  a()
end

-- A loop that allocates tables, strings and closures, so the GC runs.
function S.alloc()
  jit.off()
  local keep = {}
  local function c() record_stack(); local i = 0; while true do i = i + 1; keep[i % 64] = {i, "k" .. i, function() return i end} end end
  local function b() local r = c(); return r end
  b()
end

-- A loop that calls fast functions and C functions.
function S.calls()
  jit.off()
  allow(tostring); allow(math.floor); allow(os.clock); allow(select); allow(string.rep)
  allow(table.concat); allow(type); allow(pairs); allow(next)
  local t = {1, 2, 3}
  local function c() record_stack(); local i = 0; while true do i = i + 1; local s = tostring(i) .. type(s); local f = math.floor(i / 3) + select("#", i, f) + os.clock(); s = table.concat(t, string.rep("-", 2)); for k, v in pairs(t) do f = f + k + v end end end
  local function b() local r = c(); return r end
  b()
end

-- A loop that calls a one-line Lua function and recurses through one.
local function inc(v) return v + 1 end
local function down(n) if n > 0 then return 1 + down(n - 1) end return 0 end
function S.luacall()
  jit.off()
  allow(inc); allow(down, 4)
  local function c() record_stack(); local i = 0; while true do i = inc(i) + down(3) end end
  local function b() local r = c(); return r end
  b()
end

-- A metamethod under pcall inside a coroutine.
function S.meta()
  jit.off()
  local mt = {__index = function(t, k) record_stack(); local i = 0; while true do i = i + 1 end end}
  local co = coroutine.create(function()
    local obj = setmetatable({}, mt)
    local okp = pcall(function() return obj.missing end)
    return okp
  end)
  coroutine.resume(co)
end

-- string.gsub and table.sort callbacks.
function S.gsub()
  jit.off()
  local function cb(m) record_stack(); local i = 0; while true do i = i + 1 end end
  local r = ("abc"):gsub("b", cb)
  return r
end

function S.sort()
  jit.off()
  local function cmp(p, q) record_stack(); local i = 0; while true do i = i + 1 end end
  table.sort({3, 1, 2}, cmp)
end

-- A vararg function reached by a tail call.
function S.vararg()
  jit.off()
  local function v(...) local n = select("#", ...); record_stack(); local i = n; while true do i = i + select("#", ...) end end
  local function t(x) return v(x, 2, 3) end
  local function b() local r = t(1); return r end
  allow(select)
  b()
end

-- Nested coroutines: the main thread resumes A, A resumes B through
-- coroutine.wrap, B loops.
function S.coro()
  jit.off()
  local B = coroutine.wrap(function() record_stack(); local i = 0; while true do i = i + 1 end end)
  local A = coroutine.create(function() B() end)
  coroutine.resume(A)
end

-- A __gc finalizer that loops (run by collectgarbage in a coroutine).
function S.gc()
  jit.off()
  local X = coroutine.create(function()
    local u = newproxy(true)
    getmetatable(u).__gc = function(ud) record_stack(); local i = 0; while true do i = i + 1 end end
    u = nil
    collectgarbage()
  end)
  coroutine.resume(X)
end

-- A debug hook that loops.
function S.hook()
  jit.off()
  local function h(ev) debug.sethook(); record_stack(); local i = 0; while true do i = i + 1 end end
  local function c() debug.sethook(h, "l"); local x = 1
    return x end
  c()
end

-- JIT-compiled loops: in a called function, with a side trace, calling
-- an inlined one-line function.
function S.jit()
  jit.on()
  local function c() record_stack(); local i = 0; while true do i = i + 1; sink = i end end
  local function b() local r = c(); return r end
  b()
end

function S.jitside()
  jit.on()
  local function c() record_stack(); local i, j, k = 0, 0, 0; while true do i = i + 1; if i % 4 == 0 then j = j + 1 else k = k + i end end end
  local function b() local r = c(); return r end
  b()
end

-- Traces that hand their frame back to the interpreter at every round:
-- 2.1 stitches the trace around os.time, a C function, and the trace before
-- it ends by jumping to lj_vm_exit_interp; the inner loop's end leaves
-- through the exit handler (and on 2.0, where the C call aborts the trace).
function S.jitexit()
  jit.on()
  allow(os.time)
  local function c() record_stack(); local s = 0; while true do for j = 1, 20 do s = s + j end; os.time() end end
  local function b() local r = c(); return r end
  b()
end

function S.jitcall()
  jit.on()
  allow(inc); allow(down, 4)
  local function c() record_stack(); local i = 0; while true do i = inc(i) + down(2); sink = i end end
  local function b() local r = c(); return r end
  b()
end

-- A JIT-compiled loop that allocates, so the GC runs from the trace.
function S.jitalloc()
  jit.on()
  local keep = {}
  local function c() record_stack(); local i = 0; while true do i = i + 1; keep[i % 64] = {i} end end
  local function b() local r = c(); return r end
  b()
end

-- The parser: load() compiles a chunk again and again.
function S.parse()
  jit.off()
  allow(load)
  local src = "local a = 1 " .. string.rep("a = a + 1 ", 200) .. "return a"
  local function c() record_stack(); local i = 0; while true do local f = load(src); i = i + 1 end end
  local function b() local r = c(); return r end
  b()
end

-- Stack growth: a one-line recursion deep enough to grow the stack (and
-- allocation, so the collector shrinks it again).
local function deep(n) if n > 0 then return deep(n - 1) + 1 end local t = {n}; return #t end
function S.grow()
  jit.off()
  allow(deep, 301)
  local function c() record_stack(); local i = 0; while true do i = i + deep(300) end end
  local function b() local r = c(); return r end
  b()
end

-- Errors thrown and caught: the unwinder runs again and again.
function S.error()
  jit.off()
  allow(pcall); allow(error)
  local function c() record_stack(); local i = 0; while true do local okp = pcall(error, "x"); i = i + 1 end end
  local function b() local r = c(); return r end
  b()
end

-- Coroutine switches: the main thread resumes a coroutine that yields.
-- While the coroutine runs, lbt shows its stack (recorded as "alt").
function S.coswitch()
  jit.off()
  allow(coroutine.resume); allow(coroutine.yield)
  local function body() while true do coroutine.yield(1) end end
  local co = coroutine.create(body)
  coroutine.resume(co)
  local function c() record_stack(); local i = 0; while true do local okr = coroutine.resume(co); i = i + 1 end end
  local function b() local r = c(); return r end
  rec("alt")
  local level = 0
  while true do
    local info = debug.getinfo(co, level, "Slf")
    if not info then break end
    -- Its Lua frames only: the yield on top is one it may or may not be in.
    if info.what ~= "C" then
      rec("altframe", level, info.what, info.source, info.currentline, tostring(info.func))
    end
    level = level + 1
  end
  b()
end

-- The trace recorder, optimizer and assembler at work: jit.flush() throws
-- the loop's trace away on every turn.
function S.record()
  jit.on()
  allow(jit.flush)
  local function c() record_stack(); local i = 0; while true do jit.flush(); for j = 1, 200 do i = i + j end end end
  local function b() local r = c(); return r end
  b()
end

-- Fast functions the VM runs in assembler.
function S.ffasm()
  jit.off()
  allow(math.abs); allow(string.byte); allow(math.max); allow(tostring); allow(select)
  local function c() record_stack(); local i = 0; while true do i = i + 1; local a = math.abs(-i) + string.byte("abc", 2) + math.max(i, 3) + #tostring(i) + select(2, 1, 2) end end
  local function b() local r = c(); return r end
  b()
end

assert(S[shape], "unknown shape " .. tostring(shape))
S[shape]()
