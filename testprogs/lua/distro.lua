-- For distribution binaries that have no test host (Debian's luajit): the
-- program records its Lua frames with debug.getinfo and, on the same line,
-- calls os.clock(), where the test stops (break lj_cf_os_clock).
--
-- Usage: luajit distro.lua EXPECTED_FILE
-- Records: frame LEVEL SOURCE LINE (innermost first), then "ready".
local out = assert(io.open(arg[1], "w"))
local function record()
  for level = 2, 20 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" then
      out:write(table.concat({"frame", level - 2, info.source, info.currentline}, "\t"), "\n")
    end
  end
  out:write("ready\n")
  out:close()
end
local function inner(t) record(); local x = os.clock(); return x + #t end
local function middle(n) local r = inner({n, n}); return r end
local co = coroutine.wrap(function() local r = middle(7); return r end)
print(co())
