-- Puts values of every kind on the stack of a C call and records, with
-- LuaJIT's own tostring/type/ffi, what they are, then stops in ljgdb_break.
-- Usage: host values.lua EXPECTED_FILE
local ffi = require("ffi")
local out = assert(io.open(arg[1], "w"))

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
end

-- Fast-function names as LuaJIT itself names them (jit/vmdef.lua, found
-- through LUA_PATH set by the test).
local okv, vmdef = pcall(require, "jit.vmdef")
if okv and vmdef.ffnames then
  for id, name in pairs(vmdef.ffnames) do rec("ffname", id, name) end
end

local function shown(v)
  -- strings as hex of their bytes (tests rebuild the literal), others tostring
  if type(v) == "string" then
    return "hex:" .. (v:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  end
  return tostring(v)
end

local function lua_func(a, b)
  return a + b
end

local nested = {x = 1, y = {z = "deep"}}
local nan = 0/0
local t = {10, 20.5, "three", true, name = "alpha", nested = nested,
           [false] = "no", ["with space"] = 7, [2.5] = "float key",
           nan = nan, negnan = -nan, inf = math.huge, ninf = -math.huge}
setmetatable(nested, {__index = t})
local co = coroutine.create(function(x) coroutine.yield(x) end)
coroutine.resume(co, 1)
local cd = ffi.new("int[4]", 1, 2, 3, 4)
local vla = ffi.new("double[?]", 100)
local ud = newproxy(true)
local lud = ljgdb_lightud(0x1234)
local nul = ljgdb_lightud(0)
local long = string.rep("abcdefghij", 50)
local esc = "tab\tnl\nquote\"bs\\"

-- 42 as a double made at run time: dual-number builds keep the constant 42
-- (slot 2) as an integer TValue, but division always yields a double.
local half = #string.rep("x", 84) / 2
local args = {"hello", 42, 3.25, -0.5, 1e300, true, false, nil, t, lua_func, print,
              ljgdb_ccall, co, cd, vla, ud, lud, nul, long, esc, 2^53, 0, half}
local n = 23   -- slot 24 gets gc.total in bytes just before the stop

for i = 1, n do
  local v = args[i]
  rec("slot", i, type(v), shown(v))
end
local info = debug.getinfo(lua_func, "S")
rec("func", info.short_src, info.linedefined)
rec("cdata", tonumber(ffi.typeof(cd)), ffi.sizeof(cd), tostring(cd))
rec("cdata", tonumber(ffi.typeof(vla)), ffi.sizeof(vla), tostring(vla))
rec("longlen", #long)
-- C types as LuaJIT names them (tostring(ffi.typeof(x))) and values the
-- program set, written as lval writes a cdata's value: in a global table
-- (ffikeep, recorded as ffitab) so that they live at the stop.
ffi.cdef[[
struct point { int x; int y; };
typedef struct { double re; unsigned char flags[3]; } rec_t;
enum color { RED, GREEN = 5 };
]]
local p = ffi.new("struct point", 1, 2)
local r = ffi.new("rec_t", 2.5, {7, 8, 9})
local u64, i64 = ffi.new("uint64_t", 12345678901234), ffi.new("int64_t", -5)
ffikeep = {
  {p, "{x = " .. p.x .. ", y = " .. p.y .. "}"},
  {cd, "{" .. cd[0] .. ", " .. cd[1] .. ", " .. cd[2] .. ", " .. cd[3] .. "}"},
  {r, "{re = " .. r.re .. ", flags = {" .. r.flags[0] .. ", " .. r.flags[1] .. ", " ..
      r.flags[2] .. "}}"},
  {u64, tostring(u64)},
  {i64, tostring(i64)},
  {ffi.new("const char *", nil), "NULL"},
  {ffi.new("enum color", "GREEN"), tostring(tonumber(ffi.new("enum color", "GREEN")))},
  {ffi.new("bool", true), "true"},
  {ffi.new("float", 0.5), tostring(tonumber(ffi.new("float", 0.5)))},
  {ffi.new("int (*)(int)", nil), "NULL"},
  {ffi.new("struct point *[2]"), "{NULL, NULL}"},
}
local ffivals = {}
for i, e in ipairs(ffikeep) do
  ffivals[i] = e[1]
  rec("ffi", i, (tostring(ffi.typeof(e[1])):match("^ctype<(.*)>$")), e[2])
end
ffikeep.vals = ffivals
rec("ffitab", tostring(ffivals))
-- ctype objects (what ffi.typeof returns), as tostring names them.
ctypekeep = {ffi.typeof(1LL), ffi.typeof("struct point"), ffi.typeof("int[4]"),
             ffi.typeof("enum color"), ffi.typeof("rec_t *"), ffi.typeof("const char *")}
for i, ct in ipairs(ctypekeep) do rec("ctype", i, tostring(ct)) end
rec("ctypetab", tostring(ctypekeep))
for k, v in pairs(t) do
  if type(v) ~= "table" then rec("t", type(k), shown(k), type(v), shown(v)) end
end
rec("t", "string", shown("nested"), "table", tostring(nested))
for k, v in pairs(nested) do
  if type(v) ~= "table" then rec("nested", type(k), shown(k), type(v), shown(v)) end
end
rec("version", jit.version)
rec("gc64", tostring(ffi.abi("gc64")))
rec("jitstatus", tostring((jit.status())))
out:close()

args[n + 1] = collectgarbage("count") * 1024
ljgdb_stop(unpack(args, 1, n + 1))
