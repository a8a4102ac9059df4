-- Backtrace scenarios for lbt/lthreads.  Each scenario records, with
-- LuaJIT's own debug library, the stack it is about to stop with (levels,
-- what, source, currentline, the function, locals, varargs, upvalues) and
-- then stops in ljgdb_stop ON THE SAME LINE, so the recorded lines are the
-- lines the VM is at when the debugger looks.
-- Usage: host bt.lua EXPECTED_FILE SCENARIO
local ffi = require("ffi")
local out = assert(io.open(arg[1], "w"))
local scenario = arg[2]

local function enc(v)
  local t = type(v)
  if t == "string" then
    return t, "hex:" .. (v:gsub(".", function(c) return string.format("%02x", c:byte()) end))
  end
  return t, tostring(v)
end

local function rec(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[#parts + 1] = tostring((select(i, ...))) end
  out:write(table.concat(parts, "\t"), "\n")
  out:flush()
end

-- Fast-function names as LuaJIT itself names them (jit/vmdef.lua, found
-- through LUA_PATH set by the test).
local ok, vmdef = pcall(require, "jit.vmdef")
if ok and vmdef.ffnames then
  for id, name in pairs(vmdef.ffnames) do rec("ffname", id, name) end
end

-- (No tail calls here: a tail call would remove these frames and shift
-- every level by one.)
local function getinfo(co, level, what)
  local info
  if co then info = debug.getinfo(co, level, what)
  else info = debug.getinfo(level + 1, what) end
  return info
end

local function getlocal(co, level, i)
  local name, v
  if co then name, v = debug.getlocal(co, level, i)
  else name, v = debug.getlocal(level + 1, i) end
  return name, v
end

-- Record the stack of coroutine co, or of the caller of record_stack.
local function record_stack(tag, co)
  local first = co and 0 or 2
  local n = 0
  local level = first
  while true do
    local info = getinfo(co, level, "Slf")
    if not info then break end
    rec(tag, "frame", n, info.what, info.source, info.currentline, tostring(info.func))
    if info.what ~= "C" then
      local i = 1
      while true do
        local name, v = getlocal(co, level, i)
        if not name then break end
        if name ~= "(*temporary)" then rec(tag, "local", n, name, enc(v)) end
        i = i + 1
      end
      i = 1
      while true do
        local name, v = getlocal(co, level, -i)
        if not name then break end
        rec(tag, "vararg", n, i, enc(v))
        i = i + 1
      end
      i = 1
      while true do
        local name, v = debug.getupvalue(info.func, i)
        if not name then break end
        rec(tag, "upval", n, name, enc(v))
        i = i + 1
      end
    end
    level = level + 1
    n = n + 1
  end
  rec(tag, "depth", n)
end

-- The globals table, for the pretty-printer tests (print L->env).
rec("genv", tostring(_G))

local S = {}

-- pcall, xpcall with a handler, metamethods (__index, __add, __call), a
-- vararg function, a tail call, lua_call from C, string.gsub and
-- table.sort callbacks, all on one stack.
function S.nest()
  local function leaf(a, b, ...)
    local s, d, e, k, nul = "text", 3.14, true, nil, ljgdb_lightud(0)
    local t = {1, 2}
    record_stack("main"); ljgdb_stop()
    return s, d, e, k, nul, t
  end
  local function tail(x, ...)
    return leaf(x, "two", ...)         -- a tail call: this frame is replaced
  end
  local mt = {}
  mt.__call = function(self, v) return tail(v, "va1", 42) end
  mt.__add = function(a, b) return a.f(b) end
  mt.__index = function(t, key) return ljgdb_ccall(t, 7) end
  local obj = setmetatable({f = function(v) return obj_index(v) end}, mt)
  function obj_index(v) return obj[v] end
  local function cmp(p, q)
    local r = ("x"):gsub("x", function() return tostring(obj + 1) end)
    return p < q
  end
  local function handler(m) return m end
  local ok1, res = xpcall(function() table.sort({3, 1, 2}, cmp) end, handler)
  assert(ok1, res)
  return pcall(function() return ok1, res end)
end

-- 5000 Lua frames.
function S.deep()
  local function down(n)
    if n == 0 then
      record_stack("main"); ljgdb_stop()
      return 0
    end
    return 1 + down(n - 1)      -- not a tail call
  end
  down(5000)
end

-- Coroutines: A resumes B with coroutine.resume, B resumes C through
-- coroutine.wrap, C stops.  Others are suspended, dead, failed, not started.
function S.coro()
  local susp = coroutine.create(function(x) local y = x * 2; coroutine.yield(y) end)
  coroutine.resume(susp, 21)
  local dead = coroutine.create(function() return 1 end)
  coroutine.resume(dead)
  local failed = coroutine.create(function() error("boom") end)
  coroutine.resume(failed)
  local fresh = coroutine.create(function() end)
  local A, B
  local C = coroutine.wrap(function(tagv)
    local here = "in C"
    for _, c in ipairs({{"A", A}, {"B", B}, {"susp", susp}}) do
      rec("co", c[1], tostring(c[2]), coroutine.status(c[2]))
      record_stack(c[1], c[2])
    end
    rec("co", "dead", tostring(dead), coroutine.status(dead))
    rec("co", "failed", tostring(failed), "error")
    rec("co", "fresh", tostring(fresh), coroutine.status(fresh))
    rec("co", "C", tostring(coroutine.running()), "running")
    record_stack("main"); ljgdb_stop(here)
  end)
  B = coroutine.create(function() local inB = 2; C("c") end)
  A = coroutine.create(function() local inA = 1; coroutine.resume(B) end)
  coroutine.resume(A)
end

-- An FFI callback: C (ljgdb_call_cb) calls back into Lua.
ffi.cdef[[
void ljgdb_call_cb(void (*cb)(int), int v);
void ljgdb_ffi_stop(void);
void ljgdb_ffi_tick(int i, int n);
]]
function S.fficb()
  local cb = ffi.cast("void (*)(int)", function(v)
    local inside = v
    record_stack("main"); ljgdb_stop()
  end)
  ffi.C.ljgdb_call_cb(cb, 5)
  cb:free()
end

-- A crash: SIGSEGV writing through a NULL pointer with the FFI.
function S.crash()
  local p = ffi.cast("int *", 0)
  local function boom(v)
    record_stack("main"); p[0] = v
  end
  boom(1)
end

-- JIT-compiled code: a hot loop that calls C through the FFI from a trace.
function S.jit()
  local function hot(n)
    local acc = 0
    for i = 1, n do
      acc = acc + i
      ffi.C.ljgdb_ffi_tick(i, n)     -- stops in ljgdb_break when i == n
    end
    return acc
  end
  rec("jitline", debug.getinfo(hot, "S").linedefined + 4)
  record_stack("main"); hot(200000)
end

-- A __gc finalizer: collectgarbage() in a coroutine X finalizes a
-- userdata (newproxy) whose __gc stops.  The finalizer runs on X itself in
-- 2.0, Debian's and OpenResty's 2.1, but on the VM's own thread g->vmthref in
-- upstream 2.1 rolling: then X's stack (with collectgarbage on top) is
-- recorded from the finalizer with debug.getinfo(X, ...).
function S.gc()
  local X
  X = coroutine.create(function(tagx)
    local inX = "in X"
    local function collect()
      local u = newproxy(true)
      getmetatable(u).__gc = function(ud)
        local inside = type(ud)
        local running = coroutine.running()
        rec("gc", "running", tostring(running), tostring(X))
        if running ~= X then record_stack("X", X) end
        record_stack("main"); ljgdb_stop()
      end
      u = nil
      collectgarbage()
      return inX
    end
    collect()
  end)
  assert(coroutine.resume(X, "x"))
end

-- Nested tables, for an editor's variables view: the program records
-- every entry of each level (path, key, type, value) before it stops.
function S.tables()
  local deep = {name = "top", list = {10, 20, {x = 1.5, y = "why"}}, [true] = false}
  local function entries(path, t)
    for k, v in pairs(t) do
      local kt, ks = enc(k)
      rec("entry", path, kt, ks, enc(v))
      if type(v) == "table" then entries(path .. "/" .. ks, v) end
    end
  end
  entries("deep", deep)
  -- A Lua closure and a C closure (coroutine.wrap's), with their upvalues.
  local counter = 41
  local function bump() counter = counter + 1; return deep end
  local wrapped = coroutine.wrap(function() end)
  -- A userdata with a metatable, and a cdata array.
  local ud = newproxy(true)
  getmetatable(ud).__index = {x = 1}
  local cd = ffi.new("int[3]", 7, 8, 9)
  rec("ud", tostring(getmetatable(ud)), tostring(ffi.typeof(cd)), cd[0], cd[1], cd[2])
  for _, f in ipairs({{"bump", bump}, {"wrapped", wrapped}}) do
    local info = debug.getinfo(f[2], "S")
    rec("fn", f[1], info.what, info.linedefined)
    local i = 1
    while true do
      local name, v = debug.getupvalue(f[2], i)
      if not name then break end
      rec("fnup", f[1], i, name, enc(v))
      i = i + 1
    end
  end
  record_stack("main"); ljgdb_stop()
  return deep, bump, wrapped, ud, cd
end

-- A function of a chunk loaded from a string (no file to show): an
-- editor gets its bytecode listing in place of a source file.
function S.strchunk()
  local f = assert(load("local rs, stop = ...\nreturn function(n)\n  local m = n * 2\n"
    .. "  rs('main'); stop()\n  return m\nend\n", "=strchunk"))(record_stack, ljgdb_stop)
  local info = debug.getinfo(f, "S")
  rec("strchunk", info.source, info.linedefined, info.lastlinedefined)
  return f(21)
end

-- The collector handed a thread other than the running one, from the main
-- thread's collectgarbage(): it traverses a suspended coroutine (and
-- shrinks its stack, lj_state_shrinkstack) and frees a dead one that
-- nothing refers to any more (lj_state_free).  The test breaks in those
-- functions after the armed stop, on the line of the collectgarbage call.
function S.gcthreads()
  local susp = coroutine.create(function() coroutine.yield() end)
  coroutine.resume(susp)
  local dead = coroutine.create(function() end)
  coroutine.resume(dead)
  dead = nil
  record_stack("main"); ljgdb_stop("armed"); collectgarbage()
  rec("gcthreads", "susp", tostring(susp))
end

-- C code called from Lua: io.popen, then a read that blocks on the pipe.
-- Each "armed" stop is where the test sets a gdb catchpoint (syscall pipe2,
-- which popen() calls, or read) and continues: nothing between an armed stop
-- and the next call on its line makes that syscall.  The stack is recorded
-- on the line of the call it is for ("open" for io.popen, "main" for the
-- read), with the locals that call sees.
function S.popen()
  local cmd = "sleep 0.2; echo hello"
  local function readline()
    record_stack("open"); ljgdb_stop("armed"); local f = io.popen(cmd)
    record_stack("main"); ljgdb_stop("armed"); local l = f:read("*l")
    f:close()
    return l
  end
  rec("popen", "line", readline())
end

assert(S[scenario], "unknown scenario " .. tostring(scenario))
S[scenario]()
