-- luacheck config: `luacheck lua providers spec examples bench`
std = "lua54"
max_line_length = 120
codes = true
exclude_files = { "spec/node_modules/**", "build/**", ".luarocks-test/**" }

files["spec/**/*.lua"] = { std = "+busted" }
