-- A big heap for benchmarks: about N GC objects (tables, strings, closures
-- with their upvalues, coroutines) and one probe table, then a stop in
-- ljgdb_stop.
-- Usage: host heap.lua EXPECTED_FILE N [STRING_BYTES [SHUFFLE]]
--   STRING_BYTES (default 16) is the length of each string: with large
--   values the heap grows past 4 GB with few objects.
--   SHUFFLE (default 0): 1 puts keep's entries in a random order (a fixed
--   seed), so that its slots point all over the heap, as a real program's
--   long-lived tables do, rather than in the order the objects were made.
local out = assert(io.open(arg[1], "w"))
local n = tonumber(arg[2]) or 100000
local slen = tonumber(arg[3]) or 16
local shuffle = arg[4] == "1"
collectgarbage("stop")
local keep = {}
local k = 0
local function closure(i) return function() return i end end
local function body() coroutine.yield() end
local pad = string.rep("x", slen > 12 and slen - 12 or 0)
local made = 0
while made < n do
  k = k + 1
  local r = k % 10
  if r < 4 then
    keep[k] = {k, k + 1}                     -- 1 table
    made = made + 1
  elseif r < 7 then
    keep[k] = string.format("%s%012d", pad, k)  -- 1 string
    made = made + 1
  elseif r < 9 then
    keep[k] = closure(k)                     -- 1 function + 1 upvalue
    made = made + 2
  elseif k % 1000 == 9 then
    local co = coroutine.create(body)        -- 1 thread
    coroutine.resume(co)
    keep[k] = co
    made = made + 1
  else
    keep[k] = {}
    made = made + 1
  end
end
if shuffle then
  math.randomseed(45)
  for i = k, 2, -1 do
    local j = math.random(i)
    keep[i], keep[j] = keep[j], keep[i]
  end
end
-- One more table, last in keep: what lgcpath and lgcref look for in
-- bench/bench_heapgraph.py (its path: keep, a local of this chunk).
keep[k + 1] = {"probe"}
out:write("probe\t", tostring(keep[k + 1]), "\n")
out:write("made\t", made, "\n")
out:write("gctotal\t", string.format("%.0f", collectgarbage("count") * 1024), "\n")
out:close()
ljgdb_stop()
