-- For triage: one Lua site busy for ever, as a worker a watchdog kills
-- with SIGABRT.  The loop allocates a table and a string each round, so
-- the collector and string interning run from it; with "on" it runs in a
-- trace, with "off" in the interpreter.  Before looping, the program
-- records with debug.getinfo the frames of the site (the loop is on the
-- line that records them), then writes "ready".
-- Usage: host watchdog.lua EXPECTED_FILE on|off
local out = assert(io.open(arg[1], "w"))
if arg[2] == "off" then jit.off() else jit.on() end

-- The frames above record's caller: source and current line.
local function record()
  local level = 2
  while true do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    out:write("frame\t", info.source, "\t", info.currentline, "\n")
    level = level + 1
  end
  out:write("ready\n")
  out:close()
end

local keep = {}
local function site()
  record(); local n = 0; while true do n = n + 1; keep[n % 512] = {n, tostring(n)} end
end

local function worker()
  site()
end

worker()
