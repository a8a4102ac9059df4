-- JIT traces of many kinds of IR, dumped by LuaJIT's own jit.dump with
-- its i and s flags (-jdump=is, plain text) into a file, for lir.  Then
-- every live trace (jit.util.traceinfo) and its machine code
-- (jit.util.tracemc) is recorded, and the program stops.
-- Records:
--   dump  PATH                  jit.dump's output
--   trace N ADDR SIZE LOOP      a live trace and its machine code
--   nojit VERSION               a build without the JIT (then nothing else)
-- Usage: host irdump.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local function rec(...)
  out:write(table.concat({...}, "\t"), "\n")
  out:flush()
end

local okutil, util = pcall(require, "jit.util")
if not (okutil and jit and jit.opt and jit.status()) then
  rec("nojit", jit and jit.version or "no jit")
  ljgdb_stop()
  return
end

local path = arg[1] .. ".dump"
local dump = require("jit.dump")
jit.opt.start("hotloop=5", "hotexit=2")
dump.on("isT", path)
rec("dump", path)

-- Numbers: ints, doubles, negative zero, a denormal, huge values, math.*.
local function numbers(n)
  local a, b, c = 0, 0.5, 0
  for i = 1, n do
    a = a + i * 3 - (i % 7)
    b = b * 1.0000001 + 1e-310 + math.floor(i / 3) + math.sqrt(i) - 123456789.125
    c = c + (i > 50 and -0.0 or 2 ^ 60) + math.huge * 0 / 1
    if b ~= b then b = 0.25 end
  end
  return a, b, c
end

-- Bit operations.
local function bits(n)
  local x = 0x12345
  for i = 1, n do
    x = bit.bxor(bit.band(x, 0xffff), bit.lshift(i, 3), bit.rshift(x, 2), bit.rol(x, 5))
    x = bit.bor(x, bit.tobit(i * 7)) + bit.bnot(i)
  end
  return x
end

-- Tables: a template table, array and hash stores and loads, length,
-- metatables, pairs and ipairs.
local mt = { __index = function(t, k) return k end }
local function tables(n)
  local s = 0
  for i = 1, n do
    local t = { x = 1, y = 2, "a", "b" }
    t[i % 5 + 3] = i
    t.z = t.x + t.y
    s = s + #t + t.z
    local u = setmetatable({}, mt)
    s = s + u[3]
  end
  local big = {}
  for i = 1, 100 do big[i] = i * 2 end
  for _ = 1, n / 10 do
    for k, v in ipairs(big) do s = s + k - v end
    for k, v in pairs({ p = 1, q = 2, r = 3 }) do s = s + v end
  end
  return s
end

-- Strings: concatenation, tostring, string.* fast functions, a constant
-- longer than 20 bytes with control characters.
local function strings(n)
  local acc = 0
  local last
  for i = 1, n do
    local s = "item\t" .. i .. "\n" .. tostring(i * 0.5)
    acc = acc + #s + s:byte(1) + #string.sub(s, 2, 4)
    last = string.format("%d:%s", i, "a constant longer than twenty\r\n bytes")
    if string.find(last, "twenty", 1, true) then acc = acc + 1 end
    acc = acc + #string.rep("ab", 3) + #(s:upper())
  end
  return acc, last
end

-- A string constant longer than 20 bytes, with a control character.
local function longstr(n)
  local k = 0
  local words = { "short", "a string constant longer than twenty bytes\t!" }
  for i = 1, n do
    if words[i % 2 + 1] == "a string constant longer than twenty bytes\t!" then k = k + 1 end
  end
  return k
end

-- Closures and upvalues (open and closed), calls inlined into the trace.
local function closures(n)
  local up = 0
  local function bump(d) up = up + d; return up end
  local fs = {}
  for i = 1, n do
    bump(i)
    local k = i
    fs[#fs + 1] = function() return k + up end
    if #fs > 8 then fs = {} end
  end
  return up
end

-- Calls into builtins and Lua functions, select, type, varargs.
local function helper(a, b, ...)
  return a + b + select("#", ...)
end
local function calls(n)
  local s = 0
  for i = 1, n do
    s = s + helper(i, 2, "x", "y")
    if type(s) == "number" then s = s + tonumber("3") end
    s = s + math.max(i, 3) + math.min(i, 2) + math.abs(-i)
  end
  return s
end

-- Guards that fail often enough for side traces.
local function branches(n)
  local a, b = 0, 0
  for i = 1, n do
    if i % 3 == 0 then a = a + 1 elseif i % 5 == 0 then b = b + 2 else a = a - 1 end
  end
  return a + b
end

-- Recursion.
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end

-- The FFI: structs, arrays, 64-bit integers, a C call, pointers.
local okffi, ffi = pcall(require, "ffi")
local function cdata(n)
  if not okffi then return 0 end
  pcall(ffi.cdef, "typedef struct ljgdb_pt { int x, y; double w; } ljgdb_pt; size_t strlen(const char *);")
  local p = ffi.new("ljgdb_pt")
  local arr = ffi.new("int[16]")
  local acc = 0LL
  local len = 0
  for i = 1, n do
    p.x = p.x + i
    p.w = p.w * 0.5 + i
    arr[i % 16] = arr[i % 16] + p.x
    acc = acc * 3 + i + 0x123456789LL
    len = len + tonumber(ffi.C.strlen("hello, world"))
    local q = ffi.cast("ljgdb_pt *", p)
    len = len + q.y
  end
  return tonumber(acc % 1000), len, tonumber(arr[3])
end

local results = {}
results[#results + 1] = { numbers(300) }
results[#results + 1] = { bits(300) }
results[#results + 1] = { tables(300) }
results[#results + 1] = { strings(300) }
results[#results + 1] = { longstr(300) }
results[#results + 1] = { closures(300) }
results[#results + 1] = { calls(300) }
results[#results + 1] = { branches(600) }
results[#results + 1] = { fib(22) }
results[#results + 1] = { cdata(300) }
jit.off()
dump.off()

-- Trace numbers are dense from 1 (nothing was flushed); stop after a gap.
local n, gap = 1, 0
while gap < 100 do
  if util.traceinfo(n) then
    gap = 0
    local mc, addr, loop = util.tracemc(n)
    rec("trace", n, string.format("%.0f", addr), #mc, loop)
  else
    gap = gap + 1
  end
  n = n + 1
end
ljgdb_stop(#results)
