-- Tarantool fibers running Lua, blocked in nested calls, for lbt, lthreads
-- and lgcstat on a real Tarantool.  Run as a plain script (no box.cfg):
--
--   tarantool fibers.lua EXPECTED_FILE
--
-- Records written (tab-separated), then "ready" once every fiber blocks:
--   fiber  FID  NAME                   a fiber, its id and name
--   thread  FID  THREAD                its Lua thread (coroutine.running)
--   frame  FID  LEVEL  SOURCE  LINE    its Lua frames, innermost first, as
--                                      debug.getinfo sees them where it blocks
--   total  BYTES                       collectgarbage("count") * 1024 with the
--                                      collector stopped, the last allocation
--   retained  OBJECT  BYTES            _G.held, a table of tables, and what
--                                      the collector freed when the program
--                                      dropped one built the same way
--                                      (collectgarbage("count") before and
--                                      after, each after full collections)
local fiber = require('fiber')
local out = assert(io.open(arg[1], 'w'))
local lines = {}

local function rec(...)
  lines[#lines + 1] = table.concat({...}, '\t')
end

local function record_stack(fid)
  rec('thread', fid, tostring(coroutine.running()))
  local level = 2
  while true do
    local info = debug.getinfo(level, 'Sl')
    if not info then break end
    if info.what ~= 'C' then
      rec('frame', fid, level - 2, info.source, info.currentline)
    end
    level = level + 1
  end
end

local chans, blocked = {}, 0
local function inner(i)
  local ch = chans[i]
  blocked = blocked + 1
  record_stack(fiber.id()); local v = ch:get(); return v + 1
end
local function middle(i) local r = inner(i); return r * 2 end
local function sleeper(n)
  if n > 0 then local r = sleeper(n - 1); return r end
  blocked = blocked + 1
  record_stack(fiber.id()); fiber.sleep(1e6); return 0
end

-- Collect until a full collection frees nothing more.
local function settle()
  local c
  repeat
    c = collectgarbage('count')
    collectgarbage('collect')
  until collectgarbage('count') == c
  return c
end
local function build()
  local t = {}
  for i = 1, 40 do t['key' .. i] = { i, 'value' .. i } end
  return t
end
held = build()
local before = settle()
held = nil
local after = settle()
held = build()
rec('retained', tostring(held), string.format('%d', (before - after) * 1024))

for i = 1, 3 do
  chans[i] = fiber.channel()
  local f = fiber.new(function() local r = middle(i); return r end)
  f:name('worker' .. i)
  rec('fiber', f:id(), f:name())
end
local s = fiber.new(function() local r = sleeper(4); return r end)
s:name('sleeper')
rec('fiber', s:id(), s:name())
while blocked < 4 do fiber.yield() end
for _, l in ipairs(lines) do out:write(l, '\n') end
collectgarbage('collect')
collectgarbage('stop')
out:write('total\t', collectgarbage('count') * 1024, '\n')
out:write('ready\n')
out:close()
fiber.sleep(1e6)
