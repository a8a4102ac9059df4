-- For lframe, lup, ldown, llocals, lprint and llist: three Lua functions
-- called one from another, with locals (one name declared twice), an
-- upvalue, a global, a table; before it stops, inner() records with
-- LuaJIT's debug library every level of the stack (source, current line,
-- locals in slot order, upvalues), then stops ON THE SAME LINE; then
-- stops once more in the main chunk.
-- Usage: host frames.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))

local function enc(v)
  local t = type(v)
  if t == "string" then
    return t, "hex:" .. (v:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  end
  return t, tostring(v)
end

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
  out:flush()
end

-- The caller's stack, its level 1 first (the level lbt numbers 1 at the
-- stop: 0 is ljgdb_stop).
local function record_stack()
  local level = 2
  while true do
    local info = debug.getinfo(level, "Slf")
    if not info then break end
    rec("frame", level - 1, info.what, info.source, info.currentline)
    if info.what ~= "C" then
      local i = 1
      while true do
        local name, v = debug.getlocal(level, i)
        if not name then break end
        if name:sub(1, 1) ~= "(" then rec("local", level - 1, name, enc(v)) end
        i = i + 1
      end
      i = 1
      while true do
        local name, v = debug.getupvalue(info.func, i)
        if not name then break end
        rec("upvalue", level - 1, name, enc(v))
        i = i + 1
      end
    end
    level = level + 1
  end
end

counter = 42                                    -- a global
local shared = {name = "alpha", 10, 20}         -- inner's upvalue

local function inner(a, b)
  local x = a + b
  local x = x * 2                               -- a second x, declared last
  local t = shared
  record_stack(); ljgdb_stop()
  return x, t
end

local function middle(n)
  local label = "mid"
  local r = inner(n, 5)
  return r, label
end

function outer()
  local depth = 3
  local r = middle(7)
  return r, depth
end

rec("global", "counter", enc(counter))
outer()
-- A second stop, in the main chunk (a debugger that continued from the
-- first must have forgotten the frame it selected there).
local info = debug.getinfo(1, "Sl"); rec("top", info.source, info.currentline); ljgdb_stop()
