-- Crashes for triage (python3 -m ljgdb triage): each site records, with
-- LuaJIT's own debug library, the Lua frames it is in (innermost first:
-- source and current line of each Lua function; C functions left out),
-- then crashes ON THE SAME LINE, so the recorded lines are the ones the
-- core holds.
-- Usage: host crash.lua EXPECTED_FILE SITE
--   read_a, read_b: a read through a NULL pointer (SIGSEGV) in two places
--   abort:          ffi.C.abort() (SIGABRT)
local ffi = require("ffi")
ffi.cdef[[void abort(void);]]
jit.off()         -- (the interpreter: the crash is in the FFI's C code)
local out = assert(io.open(arg[1], "w"))
local site = arg[2]

local function frames()
  local t = {}
  for level = 2, 40 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" then t[#t + 1] = info.source .. "\t" .. info.currentline end
  end
  out:write("frames\t", table.concat(t, "\t"), "\n")
  out:close()
end

local NULL = ffi.cast("int *", 0)

local function read_a() frames(); return NULL[0] end

local function read_b(x)
  local y = x + 1
  frames(); return NULL[y - 1]
end

local function do_abort() frames(); ffi.C.abort() end

-- (No tail calls: `return f()` would take the caller's frame away.)
local function handle(name)
  local r
  if name == "read_a" then r = read_a()
  elseif name == "read_b" then r = read_b(41)
  elseif name == "abort" then r = do_abort()
  else error("no site " .. tostring(name)) end
  return r
end

local r = handle(site)
print(r)
