-- Tarantool with a fiber busy in Lua, for python3 -m ljgdb dump --pid
-- (tests/e2e/test_live_hosts.py).  Run as a plain script (no box.cfg):
--
--   tarantool busy.lua EXPECTED_FILE
--
-- The fiber "spinner" counts in the interpreter (jit.off) in spin(),
-- called from work(), for a while, then yields and starts again; its
-- first turn records its frames, as debug.getinfo sees them on the loop's
-- line, in the format of testprogs/lua/moments.lua (frame LEVEL WHAT
-- SOURCE LINE FUNC), its fiber's id and name (fiber ID NAME), then "ready".  The fiber "ticker" appends a line
-- "tick N" to EXPECTED_FILE.ticks every 50 ms: the process goes on working.
-- It first writes its function's place (ticker SOURCE LINEDEFINED
-- LASTLINEDEFINED) to EXPECTED_FILE.ticker: a moment may catch it running.
local fiber = require('fiber')
local expected = arg[1]
jit.off()

local function record()
  local f = assert(io.open(expected, 'w'))
  for level = 2, 40 do
    local info = debug.getinfo(level, 'Slf')
    if not info then break end
    f:write(table.concat({'frame', level - 2, info.what, info.source, info.currentline,
                          tostring(info.func)}, '\t'), '\n')
  end
  f:write('fiber\t', fiber.id(), '\t', fiber.name(), '\n')
  f:write('ready\n')
  f:close()
end

local recorded = false
local function spin(n)
  if not recorded then recorded = true; record() end; local i = 0; while i < n do i = i + 1 end; return i
end
local function work()
  while true do
    local r = spin(20000000)
    fiber.yield()
  end
end

local s = fiber.new(work)
s:name('spinner')
local t = fiber.new(function()
  local n = 0
  local info = debug.getinfo(1, 'S')
  local g = assert(io.open(expected .. '.ticker', 'w'))
  g:write(table.concat({'ticker', info.source, info.linedefined, info.lastlinedefined}, '\t'), '\n')
  g:close()
  while true do
    n = n + 1
    local f = assert(io.open(expected .. '.ticks', 'a'))
    f:write('tick ', n, '\n')
    f:close()
    fiber.sleep(0.05)
  end
end)
t:name('ticker')
fiber.sleep(1e6)
