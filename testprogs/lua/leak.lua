-- Leaks in known places, for lgcref and lgcpath.  Each leak is built in a
-- function of its own (no local of this chunk keeps it), and recorded:
--   leak  NAME  OBJECT  PATH        the object (tostring), the path the
--                                   program built to it, as lgcpath writes it
--                                   ("-": nothing keeps it alive)
--   ref   NAME  HOW  HOLDER  WHERE  a reference the program made to it:
--                                   HOW arr (WHERE: index), val (WHERE: key),
--                                   uv (WHERE: upvalue name), slot (WHERE:
--                                   local name), key (WHERE: its value); a
--                                   weak one as arr-weak, key-weak
--   traced OBJECT TRACENO INDEX     a closure only a trace's IR holds, as the
--                                   constant jit.util.tracek(TRACENO, INDEX)
--   zombie OBJECT                   a userdata whose __gc stored it in
--                                   _G.zombie (resurrected)
--   named OBJECT NAME               a table (_G.named) whose metatable's
--                                   __name is NAME
--   retained NAME OBJECT BYTES PATH the bytes the collector freed when the
--                                   program dropped its one reference to
--                                   an object built the same way as OBJECT
--                                   (collectgarbage("count") before and
--                                   after, each after full collections),
--                                   and the path to it the program built
-- then stops in ljgdb_break (through ljgdb_stop).
-- Usage: host leak.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
end

-- 1. A cache table that only grows.
local function leak_cache(rec)
  cache = { sessions = {} }
  -- A string made at run time that every session shares with _G.token:
  -- retained by neither (charged once, to what both share).
  token = "tok-" .. 50
  for i = 1, 50 do cache.sessions["u" .. i] = { i, "s" .. i, { n = i }, token } end
  rec("leak", "cache", tostring(cache.sessions.u42[3]), '_G.cache.sessions.u42[3]')
  rec("ref", "cache", "arr", tostring(cache.sessions.u42), 3)
  return cache.sessions
end

-- 2. Closures captured in a callback list.
local function leak_closures(rec)
  callbacks = {}
  for i = 1, 3 do
    local big = { size = i }
    callbacks[i] = function() return big end
  end
  rec("leak", "closure", tostring((select(2, debug.getupvalue(callbacks[2], 1)))),
      "(upvalue big of _G.callbacks[2])")
  rec("ref", "closure", "uv", tostring(callbacks[2]), "big")
  return callbacks[2]
end

-- 3. A suspended coroutine holding a big table in a local.
local function leak_coroutine(rec)
  worker = coroutine.create(function()
    local held = { payload = string.rep("x", 1000) }
    coroutine.yield()
    return held
  end)
  coroutine.resume(worker)
  local name, held = debug.getlocal(worker, 1, 1)
  assert(name == "held")
  rec("leak", "coroutine", tostring(held), "(local held of thread _G.worker)")
  rec("ref", "coroutine", "slot", tostring(worker), "held")
  return worker
end

-- 4. A weak-valued table does not keep what it holds.
local function leak_weak(rec)
  weakcache = setmetatable({}, { __mode = "v" })
  keeper = {}
  weakcache[1] = {}
  keeper.only = weakcache[1]
  rec("leak", "weak", tostring(keeper.only), "_G.keeper.only")
  rec("ref", "weak", "val", tostring(keeper), "only")
  rec("ref", "weak", "arr-weak", tostring(weakcache), 1)
  return keeper.only
end

-- 5. A table reachable only through an upvalue of a function that the
-- registry holds.
local function leak_registry(rec)
  local secret = { kind = "secret" }
  debug.getregistry().hook = function() return secret end
  rec("leak", "registry", tostring(secret), "(upvalue secret of registry.hook)")
  rec("ref", "registry", "uv", tostring(debug.getregistry().hook), "secret")
  return debug.getregistry().hook
end

-- 6. After the last collection: a table that only a weak-keyed table holds
-- (as a key): nothing keeps it alive, the next collection frees it.
local function orphan()
  weakkeys = setmetatable({}, { __mode = "k" })
  weakkeys[{}] = true
  local k = next(weakkeys)
  rec("leak", "orphan", tostring(k), "-")
  rec("ref", "orphan", "key-weak", tostring(weakkeys), "true")
end

-- 7. After the last collection too: a table that was a key, and whose
-- value was then set to nil.  The node keeps the dead key, but a nil value
-- keeps nothing (R lj_gc.c gc_traverse_tab), so nothing references it.
local function dead_key()
  deadkeys = {}
  deadkeys[{}] = 1
  local k = next(deadkeys)
  deadkeys[k] = nil
  rec("leak", "deadkey", tostring(k), "-")
end

-- Collect until a full collection frees nothing more (the first ones
-- also shrink the string table, stacks and buffers); g->gc.total / 1024.
local function settle()
  local c
  repeat
    c = collectgarbage("count")
    collectgarbage("collect")
  until collectgarbage("count") == c
  return c
end

local function nop() end

-- Build a leak, measure what dropping its one reference frees, build it
-- again (the same way: the same sizes) and record it.
local function retained(name, path, make, drop)
  make(nop)
  local before = settle()
  drop()
  local after = settle()
  local obj = make(rec)
  rec("retained", name, tostring(obj), string.format("%d", (before - after) * 1024), path)
end

-- 8. A closure that only a trace holds: the trace of the loop below calls
-- it and so keeps it as an IR constant (R lj_record.c rec_call_specialize).
local function leak_trace()
  local target = { kind = "traced" }
  local function get() return target end
  for _ = 1, 300 do get() end
  local util = require("jit.util")
  local found = false
  for tr = 1, 1000 do
    local info = util.traceinfo(tr)
    if info then
      for idx = -1, -info.nk, -1 do
        if util.tracek(tr, idx) == get then
          rec("traced", tostring(get), tr, idx)
          found = true
        end
      end
    end
  end
  if not found then rec("traced", tostring(get), "-", "-") end
end

-- 9. A userdata whose finalizer stores it in a global: resurrected.
local function leak_zombie()
  local u = newproxy(true)
  getmetatable(u).__gc = function(self) zombie = self end
  u = nil
  collectgarbage("collect")
  rec("zombie", tostring(zombie))
end

-- 10. A table whose metatable has a __name (a heap snapshot names it so).
local function named_table()
  named = setmetatable({}, { __name = "ljgdb.Probe" })
  rec("named", tostring(named), "ljgdb.Probe")
end

retained("cache", "_G.cache.sessions", leak_cache, function() cache.sessions = nil end)
retained("closure", "_G.callbacks[2]", leak_closures, function() callbacks[2] = nil end)
retained("coroutine", "_G.worker", leak_coroutine, function() worker = nil end)
retained("weak", "_G.keeper.only", leak_weak, function() keeper.only = nil end)
retained("registry", "registry.hook", leak_registry, function() debug.getregistry().hook = nil end)
leak_trace()
leak_zombie()
named_table()
collectgarbage("collect")
orphan()
dead_key()
rec("ready")
out:flush()
ljgdb_stop()
