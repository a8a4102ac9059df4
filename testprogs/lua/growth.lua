-- Objects made between two stops, for lgcstat --save and --diff.
-- Stop 1 after a full collection with the collector stopped (nothing is
-- freed until the end); between the stops the program makes, for each of
-- 10 names: a table, a string, a closure (with its upvalue object); it
-- files each table under its string in `sessions` and each table and
-- closure in `sessions.list` (both existed at stop 1, and only _G holds
-- them).  Stop 2; then it records:
--   total  BYTES1 BYTES2            collectgarbage("count") * 1024 at stops
--   new    table|function OBJECT    a table or closure made in between
--   newstr TEXT                     a string made in between
--   upvalues N                      the upvalue objects made in between
--   owner  PATH N                   N new objects hang there: PATH is the
--                                   nearest object that existed at stop 1
--                                   on every path to them
-- then stops a third time, with its records written.
-- Usage: host growth.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))
local names = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                "india", "juliett" }
sessions = { kept = true, list = {} }
for i = 1, 20 do sessions.list[i] = false end
local c1, c2
collectgarbage("collect")
collectgarbage("collect")
collectgarbage("stop")
c1 = collectgarbage("count")
ljgdb_stop()
for i = 1, 10 do
  local key = "growth-" .. names[i]
  local t = { id = i }
  sessions[key] = t
  sessions.list[i] = t
  sessions.list[10 + i] = function() return t end
end
c2 = collectgarbage("count")
ljgdb_stop()
out:write(string.format("total\t%d\t%d\n", c1 * 1024, c2 * 1024))
local made = sessions.list
for i = 1, 10 do
  out:write("new\ttable\t", tostring(made[i]), "\n")
  out:write("new\tfunction\t", tostring(made[10 + i]), "\n")
  out:write("newstr\tgrowth-", names[i], "\n")
end
out:write("upvalues\t10\n")
-- The tables (in both) and strings (keys of sessions) under sessions; the
-- closures and their upvalue objects under sessions.list.
out:write("owner\t_G.sessions\t20\n")
out:write("owner\t_G.sessions.list\t20\n")
out:close()
ljgdb_stop()
