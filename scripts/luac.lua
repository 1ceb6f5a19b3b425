-- scripts/luac.lua SRC OUT NAME [SRC OUT NAME ...]: compiles each Lua file SRC to bytecode OUT (debug
-- information kept: tracebacks keep their line numbers) under the chunk name "@NAME", the path the
-- source has where glsb-lua loads it (src/core/load.c uses the bytecode only under that name). Run by
-- `make` (build/luac/) and `make install` with the glsb-lua just built, so the bytecode is its liblua's.
assert(#arg >= 3 and #arg % 3 == 0, "usage: luac.lua SRC OUT NAME [SRC OUT NAME ...]")
for i = 1, #arg, 3 do
  local src, out, name = arg[i], arg[i + 1], arg[i + 2]
  local f = assert(io.open(src, "rb"))
  local text = f:read("a")
  f:close()
  local fn = assert(load(text, "@" .. name, "t"))
  local tmp = out .. ".tmp"
  local o = assert(io.open(tmp, "wb"))
  o:write(string.dump(fn))
  assert(o:close())
  assert(os.rename(tmp, out))
end
