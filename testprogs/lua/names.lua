-- Functions called under every kind of name LuaJIT's debug.getinfo(level,
-- "n") gives (method, field, upvalue, global, local, metamethod, for
-- iterator), through pcall and a tail call.  The innermost function
-- records, with LuaJIT's own debug library, each level's what, source,
-- currentline, namewhat, name and linedefined, then stops in ljgdb_stop on
-- the same line.
-- Usage: host names.lua EXPECTED_FILE
local out = assert(io.open(arg[1], "w"))

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
  out:flush()
end

local ok, vmdef = pcall(require, "jit.vmdef")
if ok and vmdef.ffnames then
  for id, name in pairs(vmdef.ffnames) do rec("ffname", id, name) end
end

-- Every level above record_stack's caller.
local function record_stack()
  local level = 2
  local n = 0
  while true do
    local info = debug.getinfo(level, "nSl")
    if not info then break end
    rec("frame", n, info.what, info.source, info.currentline, info.namewhat, info.name or "",
        info.linedefined)
    level = level + 1
    n = n + 1
  end
  out:close()
end

local obj = {}
function obj:method_m()
  record_stack(); ljgdb_stop()
end

local tab = {}
tab.field_f = function()
  obj:method_m()
end

local function upval_u()
  tab.field_f()
end

function global_g()
  upval_u()
end

local mt = {__index = function(t, k)
  global_g()
  return 1
end}

local function local_l()
  local proxy = setmetatable({}, mt)
  local v = proxy.missing
  return v
end

local function gen()
  local f = local_l
  f()
  return nil
end

local function loop()
  for _ in gen do end
end

local function replaced()
  return loop()
end

local function run()
  replaced()
end

jit.off()
pcall(run)
