-- LuaRocks spec: `luarocks --lua-version=5.4 make rockspec/gl-sandbox-scm-1.rockspec`
-- builds glsb.core (C, libcurl + libarchive), the static glsb-confine helper (musl-gcc), and installs the
-- Lua library and providers so that plain `lua5.4 -e 'require "glsb"'` works.
rockspec_format = "3.0"
package = "gl-sandbox"
version = "scm-1"

source = {
  url = "git+https://example.invalid/gl-sandbox.git",
}

description = {
  summary = "Run untrusted code in sandboxes: local (namespaces, Landlock, seccomp), E2B, OpenSandbox, Bedrock",
  detailed = [[
glsb runs untrusted code, ships files in and out and builds reusable sandbox images behind one Lua API,
across a local confined backend (the default, no account needed) and remote providers. A C core does the
transport, framing, archives and confinement; providers are plain Lua modules.
]],
  license = "MIT",
  labels = { "sandbox", "security", "e2b" },
}

dependencies = {
  "lua >= 5.4, < 5.5",
  "lua-cjson >= 2.1",
}

external_dependencies = {
  CURL = { library = "curl" },
  ARCHIVE = { header = "archive.h", library = "archive" },
  HIREDIS = { header = "hiredis/hiredis.h", library = "hiredis" },
  OPENSSL = { header = "openssl/ssl.h", library = "ssl" },
}

build = {
  type = "make",
  build_target = "all",
  build_variables = {
    LUA = "$(LUA)",
  },
  install_target = "install-rock",
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
    INST_BINDIR = "$(BINDIR)",
  },
}
