-- An idle VM, as in a server worker waiting in its event loop.  The program
-- makes a few coroutines, suspends them and returns; the host, run with
-- LJGDB_IDLE=1, then records every state's main lua_State and g->gc.total
-- (from lua_gc) and stops in an OS thread that names no Lua state, while
-- its main thread waits in C.
--
-- Usage: LJGDB_IDLE=1 [LJGDB_STATES=N] host idle.lua EXPECTED_FILE
--
-- Records written (tab-separated):
--   coroutine  ADDRESS  STATUS     each coroutine kept, with coroutine.status
--   state  L  TOTAL                (by the host) each Lua state
local out = assert(io.open(arg[1], "w"))
local keep = {}
for i = 1, 5 do
  local co = coroutine.create(function(x) local y = coroutine.yield(x + 1); return y end)
  assert(coroutine.resume(co, i))
  keep[i] = co
end
keep[6] = coroutine.create(print)                  -- never resumed
keep[7] = coroutine.create(function() end)
assert(coroutine.resume(keep[7]))                  -- dead
for _, co in ipairs(keep) do
  out:write("coroutine\t", tostring(co), "\t", coroutine.status(co), "\n")
end
_G.keep = keep
out:close()
