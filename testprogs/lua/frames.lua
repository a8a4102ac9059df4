-- For lframe, lup, ldown, llocals, lprint and llist: three Lua functions
-- called one from another, with locals (one name declared twice), an
-- upvalue, a global, a table; before it stops, inner() records with
-- LuaJIT's debug library every level of the stack (source, current line,
-- locals in slot order, upvalues), then stops ON THE SAME LINE; then
-- stops once more in the main chunk, and once in a chunk loaded from a
-- string.
-- Usage: host frames.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))

-- A value as the test reads it: type and tostring (a string in hex).
local function enc(v)
  if type(v) ~= "string" then return type(v), tostring(v) end
  return "string", "hex:" .. v:gsub(".", function(c) return ("%02x"):format(c:byte()) end)
end
local function rec(...)
  local t = {...}
  for i = 1, select("#", ...) do t[i] = tostring(t[i]) end
  out:write(table.concat(t, "\t"), "\n"); out:flush()
end

-- The names and values get(i) gives for i = 1, 2, ... until it gives none.
local function pairs_of(get)
  local got, i = {}, 1
  local name, v = get(i)
  while name do got[#got + 1] = {name, v}; i = i + 1; name, v = get(i) end
  return got
end

-- The caller's stack, its level 1 first (the level lbt numbers 1 at the
-- stop: 0 is ljgdb_stop): locals in slot order (not the VM's own "(...)"
-- temporaries), then upvalues.
local function record_stack()
  local level = 2
  local info = debug.getinfo(level, "Slf")
  while info do
    rec("frame", level - 1, info.what, info.source, info.currentline)
    if info.what ~= "C" then
      -- (Not a tail call, which would take the closure's level away: the
      -- frame is 2 levels above the closure, pairs_of and this function.)
      local lv = level
      local function get(i) local n, v = debug.getlocal(lv + 2, i); return n, v end
      for _, p in ipairs(pairs_of(get)) do
        if p[1]:sub(1, 1) ~= "(" then rec("local", level - 1, p[1], enc(p[2])) end
      end
      for _, p in ipairs(pairs_of(function(i) return debug.getupvalue(info.func, i) end)) do
        rec("upvalue", level - 1, p[1], enc(p[2]))
      end
    end
    level = level + 1
    info = debug.getinfo(level, "Slf")
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
-- A third, in a chunk loaded from a string (no file to list).
local chunk = "local s = 'from a string'; ljgdb_stop(); return s"
rec("string", chunk); assert(loadstring(chunk))()
