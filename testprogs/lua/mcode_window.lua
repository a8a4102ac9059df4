-- The arm64 mcode window running out (the seed of "failed to allocate mcode
-- memory" on arm64 servers): the JIT keeps every mcode area within half
-- its +-128 MB jump range of the exit handler.  This program takes the rest
-- of that window for itself (PROT_NONE mappings, as a big heap or many
-- thread stacks near the binary would), so no new area fits, and stops:
--   stop 1: the window is full; the current area has room left;
--   then it compiles more loops until LuaJIT needs a new area, which fails
--   (LuaJIT's own trace abort event says "failed to allocate mcode memory",
--   recorded here as "abort"), and stops again:
--   stop 2: after the failure (LuaJIT flushed every trace).
-- Records: "param" sizemcode maxmcode (KB), "blocked" bytes mapped here,
-- "traces" and "traces2" live before stops 1 and 2, "abort" trace error
-- messages.
local out = assert(io.open(arg[1], "w"))
local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
  out:flush()
end

local ffi = require("ffi")
local util = require("jit.util")
local vmdef = require("jit.vmdef")
ffi.cdef[[
void *mmap(void *addr, size_t len, int prot, int flags, int fd, long off);
int munmap(void *addr, size_t len);
]]
local MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE = 0x02, 0x20, 0x4000

local SIZEMCODE, MAXMCODE = 64, 65536
jit.opt.start("sizemcode=" .. SIZEMCODE, "maxmcode=" .. MAXMCODE, "hotloop=2")
rec("param", SIZEMCODE, MAXMCODE)

jit.attach(function(what, tr, func, pc, otr, oex)
  if what == "abort" then
    local msg = vmdef.traceerr[otr]
    if type(msg) == "string" and oex then msg = msg:format(oex) end
    rec("abort", tostring(msg))
  end
end, "trace")

-- Distinct loops, each its own prototype and root trace.
local KEEP = {}
local function loops(prefix, n)
  local src = {}
  for k = 1, n do
    src[#src + 1] = ([[
KEEP[#KEEP + 1] = function(t, n)
  local s = 0
  for i = 1, n do s = s + t[(i %% #t) + 1] * %d + i / %d end
  return s
end
KEEP[#KEEP]({1, 2, 3}, 50)
]]):format(k, k + 1)
  end
  assert(loadstring(table.concat(src), "=" .. prefix))()
end
_G.KEEP = KEEP

loops("first", 1)
local _, first = util.tracemc(1)
assert(first, "no trace compiled")

-- Take every free 64 KB of the +-128 MB around the first area (a superset
-- of the window): a mapping the kernel put elsewhere is given back.
local blocked = 0
local base = math.floor(first / 65536) * 65536
for _, chunk in ipairs({1048576, 65536}) do
  local lo = math.max(65536, base - 128 * 1048576)
  for addr = lo, base + 128 * 1048576, chunk do
    local p = ffi.C.mmap(ffi.cast("void *", addr), chunk, 0,
                         MAP_PRIVATE + MAP_ANONYMOUS + MAP_NORESERVE, -1, 0)
    local got = tonumber(ffi.cast("uintptr_t", p))
    if got == addr then
      blocked = blocked + chunk
    elseif got ~= 2^64 - 1 and got ~= -1 then
      ffi.C.munmap(p, chunk)
    end
  end
end
rec("blocked", blocked)

local function live()
  local n = 0
  for i = 1, 10000 do if util.traceinfo(i) then n = n + 1 end end
  return n
end
rec("traces", live())
ljgdb_stop()

-- More loops than the current area holds: the next area cannot be placed.
loops("more", 400)
rec("traces2", live())
ljgdb_stop()
