-- ljgdb demo: a small "API server" that keeps its configuration and user
-- sessions in tables and stops inside a C call while handling a request.
-- Usage: host demo.lua [IGNORED]
local config = {
  name = "shop-api", port = 8080, debug = false, ratio = 0.75,
  upstreams = {"10.0.0.1:80", "10.0.0.2:80"},
  limits = {rps = 1000, burst = 50},
}

local sessions = {}
for i = 1, 100 do
  sessions["user" .. i] = {id = i, cart = {}}
end

local function handle(req)
  local user = sessions[req.user]
  user.cart[#user.cart + 1] = req.item
  -- stands for a blocking call into C (a socket read, a database driver...)
  ljgdb_stop(config, req, user)
end

handle({user = "user42", item = "book", qty = 2})
