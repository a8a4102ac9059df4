-- A small heap with a bit of everything, for the corruption fuzzer
-- (bench/fuzz_corrupt.py, tests/test_hardening.py): tables with array and
-- hash parts, nested and self-referencing tables, strings, closures with
-- closed and open upvalues, suspended, dead and failed coroutines, a
-- coroutine resumed inside another, FFI cdata (a VLA too), userdata, a
-- string buffer, a finalizer waiting, JIT traces; then it stops inside
-- nested Lua calls (pcall, a metamethod, a vararg function).
-- Usage: host fuzz.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local has_ffi, ffi = pcall(require, "ffi")
local has_buffer, sbuf = pcall(require, "string.buffer")
collectgarbage("stop")

local keep = {}
local t = {1, 2, 3, "four", 5.5, true, name = "alpha", [10.5] = "x", nested = {a = {b = {}}}}
t.self = t
keep.t = t
for i = 1, 40 do keep[#keep + 1] = {i, tostring(i), i * 0.5} end
for i = 1, 30 do keep["k" .. i] = string.rep(string.char(65 + i % 26), i) end
local function mk(i) local a, b = i, {i} return function() return a, b end end
for i = 1, 10 do keep[#keep + 1] = mk(i) end
local function body(mode)
  if mode == "error" then error("boom", 0) end
  coroutine.yield(mode)
  return mode
end
local susp = coroutine.create(body); coroutine.resume(susp, "y")
local dead = coroutine.create(body); coroutine.resume(dead, "y"); coroutine.resume(dead)
local failed = coroutine.create(body); coroutine.resume(failed, "error")
keep.co = {susp, dead, failed}
if has_ffi then
  keep.cd = {ffi.new("int[?]", 20), ffi.new("double[4]"), ffi.new("struct { int a; char b[9]; }")}
  keep.cdgc = ffi.gc(ffi.new("double[2]"), function() end)
end
keep.ud = io.stdout
if has_buffer and sbuf.new then keep.buf = sbuf.new():put("buffered bytes") end
setmetatable(keep, {__index = function(_, k) return k end})
-- JIT traces (a loop and a side exit), when there is a JIT.
local s = 0
for i = 1, 300 do
  if i % 3 == 0 then s = s + i else s = s - 1 end
end
keep.s = s
-- A userdata with a finalizer that has already been collected and waits:
-- newproxy exists in LuaJIT.
if newproxy then
  local p = newproxy(true)
  getmetatable(p).__gc = function() end
  keep.proxy = p
end
out:write("ready\n")
out:close()

local mt = {__add = function(a, b)
  local inner = coroutine.wrap(function(x, ...)
    local up = x
    ljgdb_stop(t, up, ...)
    return up
  end)
  return inner(a.v, "va1", 2, b)
end}
local function vararg(...)
  local o = setmetatable({v = select("#", ...)}, mt)
  return o + 1
end
local ok = pcall(function(x) local y = x .. "!" return vararg(y, 2, 3) end, "arg")
print(ok)
