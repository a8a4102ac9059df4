-- Request handlers for nginx + lua-nginx-module (testprogs/nginx/nginx.conf),
-- each of a known shape, recording its true frames before it blocks.
--
-- Each handler appends to $LJGDB_EXPECTED (tab-separated):
--   req  NAME  THREAD                the request's coroutine (coroutine.running)
--   frame  NAME  LEVEL  SOURCE  LINE its Lua frames, innermost first, where it
--                                    blocks (debug.getinfo, on that same line)
--   exdata  NAME  POINTER            the thread's exdata (luajit2's
--                                    thread.exdata): the request it serves
--   held  NAME  OBJECT  HOLDER       a table the module keeps for the
--                                    request: HOLDER[NAME] (M.held) is the
--                                    one reference to it
-- and the test writes "ready" once every request is blocked.
local M = { held = {} }

local function rec(...)
  local f = assert(io.open(os.getenv("LJGDB_EXPECTED"), "a"))
  f:write(table.concat({...}, "\t"), "\n")
  f:close()
end

local has_exdata, exdata = pcall(require, "thread.exdata")

local function record(name)
  M.held[name] = { "request data of " .. name }
  rec("held", name, tostring(M.held[name]), tostring(M.held))
  rec("req", name, tostring(coroutine.running()))
  if has_exdata then rec("exdata", name, tostring(exdata())) end
  for level = 2, 40 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" then
      rec("frame", name, level - 2, info.source, info.currentline)
    end
  end
end

-- ngx.sleep in nested calls.
local function sleeper(name, n)
  if n > 0 then local r = sleeper(name, n - 1); return r end
  record(name); ngx.sleep(1000); return 0
end
function M.sleep() local r = sleeper("sleep", 3); ngx.say(r) end

-- A cosocket read on a connection that never sends anything.
local function reader(name, port)
  local sock = ngx.socket.tcp()
  assert(sock:connect("127.0.0.1", port))
  sock:settimeout(1000000)
  record(name); local line = sock:receive(); return line
end
function M.read() local r = reader("read", tonumber(ngx.var.arg_port)); ngx.say(r) end

-- A coroutine made with coroutine.wrap (ngx_lua's own), sleeping inside.
function M.wrap()
  local f = coroutine.wrap(function(x) local r = sleeper("wrap", x); return r end)
  local r = f(2); ngx.say(r)
end


-- A worker busy in Lua: the interpreter spins in c(), called from b(), in
-- the request's coroutine; its frames go to $LJGDB_EXPECTED.spin in the
-- format of testprogs/lua/moments.lua (frame LEVEL WHAT SOURCE LINE FUNC),
-- on the same line as the loop.
local function record_spin(suffix)
  local f = assert(io.open(os.getenv("LJGDB_EXPECTED") .. (suffix or ".spin"), "w"))
  for level = 2, 40 do
    local info = debug.getinfo(level, "Slf")
    if not info then break end
    f:write(table.concat({"frame", level - 2, info.what, info.source, info.currentline,
                          tostring(info.func)}, "\t"), "\n")
  end
  f:write("ready\n")
  f:close()
end
function M.spin()
  jit.off()
  local function c() record_spin(); local i = 0; while true do i = i + 1 end end
  local function b() local r = c(); return r end
  b()
end

-- A worker busy in Lua under load (tests/e2e/test_live_hosts.py): each
-- request to /busy?n=N counts to N in the interpreter in d(), called from
-- c(), and answers "busy N".  The first request of the worker records d()'s
-- frames to $LJGDB_EXPECTED.busy (as record_spin does), on the loop's line.
local busy_recorded = false
function M.busy()
  jit.off()
  local n = tonumber(ngx.var.arg_n) or 1000000
  local function d()
    if not busy_recorded then busy_recorded = true; record_spin(".busy") end; local i = 0; while i < n do i = i + 1 end; return i
  end
  local function c() local r = d(); return r end
  ngx.say("busy ", c())
end

-- What a large configuration's load and reload do to glibc's heap
-- (tests/e2e/test_lmalloc.py): each request to /frag?n=N allocates N
-- blocks of many sizes with malloc, frees most of them and keeps every
-- tenth for the life of the worker, and answers "frag N".
local ffi = require("ffi")
ffi.cdef[[
void *malloc(size_t n);
void free(void *p);
]]
M.kept = {}
function M.frag()
  local n = tonumber(ngx.var.arg_n) or 2000
  local ptrs = {}
  for i = 1, n do ptrs[i] = ffi.C.malloc(16 + (i * 53) % 4000) end
  for i = 1, n do
    if i % 10 ~= 0 then ffi.C.free(ptrs[i]) else M.kept[#M.kept + 1] = ptrs[i] end
  end
  ngx.say("frag ", n)
end

return M
