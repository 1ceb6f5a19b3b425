-- luacheck config: `luacheck lua providers spec examples bench`
std = "lua54"
max_line_length = 120
codes = true
-- methods implementing a hook interface often do not need self
ignore = { "212/self" }
exclude_files = { "spec/node_modules/**", "build/**", ".luarocks-test/**" }

files["spec/**/*.lua"] = { std = "+busted", max_line_length = 140 }
