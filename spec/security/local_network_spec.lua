-- Issue 25 §7: a network of the sandbox's own. network = true used to share the host's network
-- namespace: sandbox code read a host-only 127.0.0.1 service, bound 0.0.0.0 on the host, and one
-- sandbox read another's loopback server. Now each networked sandbox has a namespace of its own with
-- user-mode networking (slirp4netns) and nftables rules (src/confine/sb_usernet.c).
-- The world here is made by the spec, as root: a "host" network namespace (198.51.100.1, where
-- glsb-lua runs the sandboxes: spec/security/netns/run.lua) joined by a veth to an "internet" one
-- (198.51.100.10 and .11, and 169.254.169.254 standing for cloud metadata), and canaries only the
-- host should reach: 127.0.0.1:8081 and 198.51.100.1:8082. A name, api.example.test, is 198.51.100.11
-- in the /etc/hosts of the host's mount namespace (unshare -m).
local cjson = require "cjson"
local core = require "glsb.core"
local helper = require "local.helper"

local DIR = helper.root .. "/spec/security/netns"
local GLSB_LUA = helper.root .. "/build/glsb-lua"

local function missing()
  if core.geteuid() ~= 0 then return "needs root (it makes network namespaces)" end
  for _, tool in ipairs({ "ip", "nsenter", "unshare", "slirp4netns", "nft", "python3" }) do
    local _, code = helper.sh("command -v " .. tool .. " >/dev/null 2>&1 || test -x /usr/sbin/" .. tool)
    if code ~= 0 then return "needs " .. tool .. " (scripts/install-deps installs it)" end
  end
  return nil
end

describe("a network of the sandbox's own #security #local", function()
  local why = missing()
  if why then
    it("runs", function() pending(why) end)
    return
  end

  local tmp, host_ns, inet_ns, servers, result, raw = nil, nil, nil, {}, nil, nil

  local function must(cmd)
    local out, code = helper.sh(cmd .. " 2>&1")
    assert(code == 0, cmd .. ": " .. out)
    return out
  end

  setup(function()
    tmp = helper.private_tmp()
    local tag = tostring(core.getpid())
    host_ns, inet_ns = "glsbhost" .. tag, "glsbinet" .. tag
    must("ip netns add " .. host_ns)
    must("ip netns add " .. inet_ns)
    must("ip link add gh" .. tag .. " type veth peer name gi" .. tag)
    must("ip link set gh" .. tag .. " netns " .. host_ns)
    must("ip link set gi" .. tag .. " netns " .. inet_ns)
    must("ip -n " .. host_ns .. " addr add 198.51.100.1/24 dev gh" .. tag)
    must("ip -n " .. inet_ns .. " addr add 198.51.100.10/24 dev gi" .. tag)
    must("ip -n " .. inet_ns .. " addr add 198.51.100.11/24 dev gi" .. tag)
    must("ip -n " .. inet_ns .. " addr add 169.254.169.254/32 dev gi" .. tag)
    for _, ns in ipairs({ host_ns, inet_ns }) do
      must("ip -n " .. ns .. " link set lo up")
    end
    must("ip -n " .. host_ns .. " link set gh" .. tag .. " up")
    must("ip -n " .. inet_ns .. " link set gi" .. tag .. " up")
    must("ip -n " .. host_ns .. " route add default via 198.51.100.10")
    -- the internet's servers, and the host's canaries
    for ns, specs in pairs({
      [inet_ns] = "198.51.100.10:80:inet-a 198.51.100.11:80:inet-b 169.254.169.254:80:metadata",
      [host_ns] = "127.0.0.1:8081:host-loopback 198.51.100.1:8082:host-address",
    }) do
      local log = tmp .. "/" .. ns .. ".log"
      local pid = must("nsenter --net=/run/netns/" .. ns .. " python3 " .. helper.q(DIR .. "/server.py") .. " "
        .. specs .. " > " .. helper.q(log) .. " 2>&1 & echo $!"):match("%d+")
      servers[#servers + 1] = pid
      for _ = 1, 100 do
        if (helper.read(log) or ""):find("listening", 1, true) then break end
        os.execute("sleep 0.05")
      end
    end
    helper.write(tmp .. "/hosts", "127.0.0.1\tlocalhost\n198.51.100.11\tapi.example.test\n")
    local out_path = tmp .. "/result.json"
    raw = helper.sh("cd " .. helper.q(helper.repo) .. " && unshare -m sh -c " .. helper.q("mount --bind "
      .. helper.q(tmp .. "/hosts") .. " /etc/hosts && exec nsenter --net=/run/netns/" .. host_ns .. " timeout 300 "
      .. helper.q(GLSB_LUA) .. " " .. helper.q(DIR .. "/run.lua") .. " " .. helper.q(out_path) .. " "
      .. helper.q(DIR)) .. " 2>&1")
    result = cjson.decode(helper.read(out_path) or "null")
  end)

  teardown(function()
    for _, pid in ipairs(servers) do os.execute("kill " .. pid .. " 2>/dev/null") end
    if host_ns then os.execute("ip netns del " .. host_ns .. " 2>/dev/null") end
    if inet_ns then os.execute("ip netns del " .. inet_ns .. " 2>/dev/null") end
  end)

  local function part(name)
    assert.is_table(result, "the run wrote no result: " .. tostring(raw))
    assert.is_table(result[name], name .. " missing: " .. cjson.encode(result))
    assert.is_nil(result[name].error, name .. ": " .. tostring(result[name].error))
    return result[name]
  end

  local REFUSED = "blocked: ConnectionRefusedError"

  it("reaches the outside, but not the host's loopback, its addresses or link-local metadata", function()
    local r = part("open")
    assert.are.equal("inet-a", r.outside_a)
    assert.are.equal("inet-b", r.outside_b)
    assert.are.equal(REFUSED, r.own_loopback)              -- its 127.0.0.1 is its own: the canary is not there
    assert.are.equal(REFUSED, r.host_loopback_via_gateway) -- slirp4netns's alias of the host's loopback
    assert.are.equal(REFUSED, r.host_address)
    assert.are.equal(REFUSED, r.metadata)
  end)

  it("get_host(port) forwards one host port on 127.0.0.1 to that port, and opens nothing else", function()
    local r = part("forward")
    local port = tonumber(r.host:match("^127%.0%.0%.1:(%d+)$"))
    assert.truthy(port, r.host)
    assert.are.equal(r.host, r.again)                      -- the same port asked again: the same forward
    assert.are.same({ "127.0.0.1:" .. port }, r.new_listeners)
    local reach = part("forward_reach")
    assert.are.equal("sandbox-b", reach.any)                -- a server on 0.0.0.0 in the sandbox
    assert.are.equal("sandbox-b-loopback", reach.loopback) -- and one on its 127.0.0.1
  end)

  it("two networked sandboxes cannot reach each other", function()
    local r = part("cross")
    assert.are.equal(REFUSED, r.b_via_gateway)
    assert.are.equal(REFUSED, r.b_via_host_address)
    assert.are.equal(REFUSED, r.b_port_in_a)
    assert.are.equal(REFUSED, r.b_port_in_a_loopback)
  end)

  it("network = {allow, deny}: allow wins, deny holds, and an allowed link-local address is reached", function()
    local r = part("allowlist") -- allow 198.51.100.11 and 169.254.169.254, deny 0.0.0.0/0
    assert.are.equal("inet-b", r.outside_b)
    assert.are.equal("metadata", r.metadata)
    assert.are.equal(REFUSED, r.outside_a)
    assert.are.equal(REFUSED, r.host_address)
    r = part("denylist") -- deny 198.51.100.10
    assert.are.equal(REFUSED, r.outside_a)
    assert.are.equal("inet-b", r.outside_b)
    assert.are.equal(REFUSED, r.metadata)
  end)

  it("a name in allow is pinned to its addresses at create", function()
    local r = part("by_name")
    assert.are.equal("inet-b", r.by_name)
    assert.are.equal(REFUSED, r.outside_a)
    assert.truthy(result.by_name_hosts:find("198.51.100.11\tapi.example.test\n", 1, true), result.by_name_hosts)
  end)

  it("no helper process outlives its sandbox, nor a supervisor killed with SIGKILL", function()
    assert.are.equal(1, part("open") and result.helpers_per_sandbox)
    assert.is_true(result.helpers >= 6, tostring(result.helpers))
    assert.are.same({}, result.helpers_left)
    local k = part("killed_supervisor_helpers")
    assert.are.equal(1, k.count)
    assert.is_true(k.gone)
  end)
end)
