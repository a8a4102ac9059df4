-- Objects named every way the V8 heap snapshot names them, for the test
-- that the snapshot's graph built in C equals the one built in Python:
-- keys of every kind (strings, whole numbers, fractions, negative and huge
-- numbers, booleans, tables, functions), strings that JSON must escape
-- (quotes, control bytes, UTF-8, bytes that are no UTF-8, a long one cut
-- in the middle of a character), weak tables of each mode, metatables with
-- __name on a table and a userdata, C functions with upvalues, Lua
-- closures with several upvalues, open and closed, a suspended coroutine's
-- locals, an array and a hash part of more than one piece, and traces.
-- Then stops in ljgdb_break (through ljgdb_stop).
-- Usage: host snapshot.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))

kinds = {}
kinds.str = "a string key"
kinds[1], kinds[2], kinds[7] = {}, {}, {}
kinds[1.5] = {}
kinds[-1] = {}
kinds[2 ^ 40] = {}
kinds[math.huge] = {}
kinds[true], kinds[false] = {}, {}
local tkey, fkey = {}, function() end
kinds[tkey] = "table key"
kinds[fkey] = "function key"
kinds["0"] = {}

texts = {
  'quote " and backslash \\',
  "tab\tnewline\nreturn\rbell\afeed\fback\bdel\127nul\0end",
  "UTF-8: h\195\169llo \226\130\172 \240\159\152\128",
  "bad: \255\254 \192\128 \237\160\128 \244\144\128\128 \226\130",
  string.rep("x", 199) .. "\226\130\172",
  string.rep("y", 250),
}

local wk = setmetatable({}, { __mode = "k" })
local wv = setmetatable({}, { __mode = "v" })
local wkv = setmetatable({}, { __mode = "kv" })
wk[texts] = {}
wk[kinds] = "strong value"
wv[1], wv.x = kinds, {}
wkv[kinds] = texts
weak = { wk, wv, wkv }

named = setmetatable({}, { __name = "snap.Named" })
local u = newproxy(true)
getmetatable(u).__name = "snap.Box"
boxes = { u }

local a, b, c = {}, "upvalue string", 3
function three() return a, b, c end
gm = string.gmatch("one two", "%a+")
wrapped = coroutine.wrap(function() coroutine.yield() end)
wrapped()

co = coroutine.create(function(x)
  local held, other = { x }, "local string"
  local function inner() return held, other end
  coroutine.yield(inner)
  return held
end)
local _, inner = coroutine.resume(co, 42)
open_closure = inner

big = {}
for i = 1, 70000 do big[i] = {} end
bighash = {}
for i = 1, 20000 do bighash["k" .. i] = i % 2 == 0 and {} or "v" .. i end

local sum = 0
for i = 1, 200 do sum = sum + #texts[1 + i % 6] end
local tr = jit and jit.util and jit.util.traceinfo and jit.util.traceinfo(1)
out:write("traces\t", tr and "yes" or "no", "\n")
out:close()
ljgdb_stop()
