-- confine_socket_spec.lua: the sandbox may create only the sockets a code interpreter needs:
-- AF_UNIX, AF_INET/AF_INET6 (its own loopback-only net namespace, or the host's with
-- --network) and AF_NETLINK with NETLINK_ROUTE (glibc's getaddrinfo). Every other family
-- (AF_VSOCK: the machine-wide vsock port space; AF_PACKET, AF_ALG, AF_XDP, ...) and every other
-- netlink protocol fails with EAFNOSUPPORT, from the seccomp filter.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*)/") or ".") .. "/../confine/helper.lua")

local PROBE = [[
import socket, errno
def try_socket(fam, kind, proto=0):
    try:
        socket.socket(fam, kind, proto).close()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
for fam in range(0, 46):
    kind = socket.SOCK_STREAM if fam in (1, 2, 10, 40) else socket.SOCK_DGRAM
    print("family", fam, try_socket(fam, kind))
for proto in (0, 4, 9, 15, 16):
    print("netlink", proto, try_socket(socket.AF_NETLINK, socket.SOCK_RAW, proto))
socket.socketpair()
print("socketpair unix OK")
try:
    socket.socketpair(40)
    print("socketpair vsock OK")
except OSError as e:
    print("socketpair vsock", errno.errorcode.get(e.errno))
print("getaddrinfo", socket.getaddrinfo("localhost", 80, flags=socket.AI_ADDRCONFIG)[0][4][0])
]]

describe("glsb-confine sandbox socket families #security #confine", function()
  setup(H.require_binary)

  for _, network in ipairs({ false, true }) do
    it("allows unix, inet, inet6 and netlink-route only" .. (network and " (--network)" or ""), function()
      local out, code = H.python(PROBE, { args = network and { "--network" } or nil })
      assert.are.equal(0, code, out)
      local allowed = { [1] = true, [2] = true, [10] = true, [16] = true }
      for fam = 0, 45 do
        local got = out:match("\nfamily " .. fam .. " (%S+)") or out:match("^family " .. fam .. " (%S+)")
        if allowed[fam] then
          assert.are.equal("OK", got, "family " .. fam .. "\n" .. out)
        else
          assert.are.equal("EAFNOSUPPORT", got, "family " .. fam .. "\n" .. out)
        end
      end
      assert.matches("\nnetlink 0 OK\n", out)
      for _, proto in ipairs({ 4, 9, 15, 16 }) do
        assert.matches("\nnetlink " .. proto .. " EAFNOSUPPORT\n", out)
      end
      assert.matches("\nsocketpair unix OK\n", out)
      assert.matches("\nsocketpair vsock EAFNOSUPPORT\n", out)
      assert.matches("\ngetaddrinfo [%x:.]+\n", out) -- still resolves with AI_ADDRCONFIG
    end)
  end
end)
