-- Heaps for lgcstat.  The program stops (ljgdb_stop) once per phase; each
-- phase creates a known number of GC objects of known types and nothing
-- else, so the test can compare lgcstat's per-type counts between two
-- stops with what the program says it created.
--
-- Usage: host gc.lua EXPECTED_FILE
--
-- Records written (tab-separated), all before the first stop except the
-- last phase's:
--   phase  N  NAME                     the Nth stop is phase NAME
--   delta  NAME  TYPE  COUNT           objects of TYPE the phase creates
--                                      (types as lgcstat names them; types
--                                      not listed: 0 new objects)
--   pending  NAME  COUNT               objects waiting for their finalizer
--   traces  NAME  COUNT                JIT traces alive (jit.util)
--
-- Exactness needs a quiet VM between stops: the JIT is off (traces would
-- be GC objects), the collector is stopped, every object made is kept
-- reachable, and everything a phase needs (functions, ctypes, the output
-- file) exists before the baseline.
local out = assert(io.open(arg[1], "w"))
-- jit.util is a module of its own (absent when the JIT is compiled out).
local has_jit, jutil = pcall(require, "jit.util")
has_jit = has_jit and type(jutil) == "table" and jutil.traceinfo ~= nil
if jit and jit.off then jit.off() end
if jit and jit.flush then jit.flush() end
local has_ffi, ffi = pcall(require, "ffi")
local has_buffer, sbuf = pcall(require, "string.buffer")

local function rec(...)
  out:write(table.concat({...}, "\t"), "\n")
end

local keep = {}              -- everything the phases create stays reachable
local nphase = 0
local function stop(name)
  nphase = nphase + 1
  collectgarbage("stop")
  ljgdb_stop(name)
end

-- Everything below is created before the baseline.
local VLA, D4, S
local cdfin = function() end
if has_ffi then
  VLA = ffi.typeof("int[?]")
  D4 = ffi.typeof("double[4]")
  S = ffi.typeof("struct { int a; double b; char c[24]; }")
end
local function body(mode)
  if mode == "yield" then coroutine.yield() end
  if mode == "error" then error("boom", 0) end
end
local function make_closure(i) return function() return i end end
local function with_open_upvalues()
  local a, b = 1, 2
  local f = function() return a + b end     -- a and b stay open upvalues
  keep[#keep + 1] = f
  stop("closures")
  return f
end
local proxy_base = newproxy(true)
local finalizing = false
getmetatable(proxy_base).__gc = function()
  if not finalizing then
    finalizing = true
    stop("finalizers")
  end
end
local srep = string.rep
local create, resume = coroutine.create, coroutine.resume

local NPROXY = 10
local phases = {
  {"empty", {}},
  {"tables", {table = 1000 + 100 + 50 + 1}},
  {"strings", {string = 200 + 5}},
  {"coroutines", {thread = 100}},
  {"closures", {["function"] = 300 + 1, upvalue = 300 + 2}},
  {"cdata", {cdata = has_ffi and (50 + 50 + 20 + 10) or 0}},
  {"userdata", {userdata = NPROXY + 3 + (has_buffer and 3 or 0), table = 1}},
  {"finalizers", {table = -1}},
  {"jit", nil},
}
for i, p in ipairs(phases) do
  rec("phase", i, p[1])
  if p[2] then
    for ty, n in pairs(p[2]) do rec("delta", p[1], ty, n) end
  end
end
rec("pending", "finalizers", NPROXY - 1)
out:flush()
local tmpfiles = {}

collectgarbage("collect")
collectgarbage("collect")

-- 1. The baseline.
stop("empty")

-- 2. Small tables, tables with array and hash parts, one big array.
for i = 1, 1000 do keep[#keep + 1] = {} end
for i = 1, 100 do keep[#keep + 1] = {1, 2, 3, 4, 5} end
for i = 1, 50 do keep[#keep + 1] = {a = 1, b = 2, c = 3} end
local big = {}
for i = 1, 100000 do big[i] = i end
keep[#keep + 1] = big
stop("tables")

-- 3. Strings: 200 small distinct ones, 5 of over a megabyte.
for i = 2, 201 do keep[#keep + 1] = srep("\1", i) end
for i = 1, 5 do keep[#keep + 1] = srep("\2", 1048576 + i) end
stop("strings")

-- 4. Coroutines: fresh, suspended, dead and failed.
for i = 1, 40 do keep[#keep + 1] = create(body) end
for i = 1, 30 do local co = create(body); resume(co, "yield"); keep[#keep + 1] = co end
for i = 1, 20 do local co = create(body); resume(co, "done"); keep[#keep + 1] = co end
for i = 1, 10 do local co = create(body); resume(co, "error"); keep[#keep + 1] = co end
stop("coroutines")

-- 5. Closures with a closed upvalue each, then a stop inside a function
-- whose two locals are open upvalues of a closure.
for i = 1, 300 do keep[#keep + 1] = make_closure(i) end
with_open_upvalues()

-- 6. FFI cdata: variable-length arrays, fixed arrays, structs, and cdata
-- with a finalizer (ffi.gc).
if has_ffi then
  for i = 1, 50 do keep[#keep + 1] = VLA(i * 3) end
  for i = 1, 50 do keep[#keep + 1] = D4() end
  for i = 1, 20 do keep[#keep + 1] = S() end
  for i = 1, 10 do keep[#keep + 1] = ffi.gc(D4(), cdfin) end
end
stop("cdata")

-- 7. Userdata: proxies with a __gc metamethod, files, string buffers.
local proxies = {}
for i = 1, NPROXY do proxies[i] = newproxy(proxy_base) end
for i = 1, 3 do tmpfiles[i] = io.tmpfile() end
if has_buffer then
  for i = 1, 3 do
    local b = sbuf.new()
    b:put(srep("\1", 2)):put(srep("\1", 3))
    keep[#keep + 1] = b
  end
end
stop("userdata")

-- 8. Drop the proxies (and their table) and collect: the first finalizer
-- stops while the others wait on g->gc.mmudata.
proxies = nil
collectgarbage("collect")

-- 9. JIT traces: hot loops (a root trace with side traces), then count
-- the traces LuaJIT has.
if has_jit then
  jit.on()
  local acc = 0
  for i = 1, 20000 do
    if i % 3 == 0 then acc = acc + 1 else acc = acc + 2 end
  end
  local t = {}
  for i = 1, 5000 do t[i] = i * 2 end
  keep[#keep + 1] = acc
  keep[#keep + 1] = t
  jit.off()
  local n = 0
  for tr = 1, 10000 do
    if jutil.traceinfo(tr) then n = n + 1 end
  end
  rec("traces", "jit", n)
else
  rec("traces", "jit", "none")
end
out:flush()
stop("jit")
out:close()
