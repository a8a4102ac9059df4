-- Bytecode listings by LuaJIT's own jit.bc (jit.bc.dump(f, out, true):
-- what `luajit -bl` writes), for lbc.  Loads each file named after
-- EXPECTED_FILE (not running it), a few chunks of other names, a function
-- with constants of every kind and one whose loop the JIT has compiled
-- (patched FORL), dumps each to a file of its own, then stops.  Records:
--   dump  NAME  FUNCTION  PATH      FUNCTION (tostring) dumped to PATH;
--                                   NAME is the file for loaded files
--   unloadable  FILE  ERROR         a file this LuaJIT does not compile
-- Usage: host bc.lua EXPECTED_FILE [LUA_FILE ...]
local out = assert(io.open(arg[1], "w"))
local bc = require("jit.bc")
local keep = {}
local function record(name, f)
  keep[#keep + 1] = f
  local path = arg[1] .. "." .. #keep
  local fh = assert(io.open(path, "w"))
  bc.dump(f, fh, true)
  fh:close()
  out:write("dump\t", name, "\t", tostring(f), "\t", path, "\n")
end

for i = 2, #arg do
  local f, err = loadfile(arg[i])
  if f then record(arg[i], f) else out:write("unloadable\t", arg[i], "\t", err, "\n") end
end

-- Chunk names as lj_debug_pushloc writes them: "=name", a source longer
-- than 40 bytes (its prototype's address), a short source (quoted).
record("=name", assert(loadstring("local a = ... return a + 1", "=stdin")))
record("long", assert(loadstring("local t = {} for i = 1, 3 do t[i] = i * 2 end return t")))
record("short", assert(loadstring("return 1")))

-- Constants of every kind: strings with control characters and longer
-- than 40 bytes, numbers (negative, large, inf), TSETM's, upvalues.
local up1, up2 = 1, "two"
local function consts(...)
  local s = "tab\there\nnew line\r\0 and \127, and a string longer than forty bytes"
  local t = { 1, 2, 3, ... }
  local big, neg, inf, small = 123456789012, -0.5, 1e309, 1.5e-7
  up1 = up1 + 0.25
  up2 = "changed"
  if s == "x" then return nil end
  for k, v in pairs(t) do t[k] = v .. s end
  return big + neg + inf + small, function() return up1, up2 end
end
record("consts", consts)

-- A loop the JIT has compiled: its FORL is now a JFORL.
local function hot()
  local s = 0
  for i = 1, 1000 do s = s + i % 7 end
  return s
end
hot()
hot()
record("hot", hot)
out:close()
ljgdb_stop()
