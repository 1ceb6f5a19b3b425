# gl-sandbox (glsb): build, test, install, demo.
#   make            build/glsb-lua, build/lib/glsb/core.so (+ core_*.so parts), build/glsb-confine
#   make demo       install deps, build, run examples/quickstart.lua, then examples/chart.lua (build/hist.png),
#                   then `build/glsb run examples/hello.py` (the glsb command, docs/cli.md)
#   make test       install deps, build, run every spec (C tests, busted, conformance)
#   make test-live  the contract suite against real OpenSandbox / E2B / Bedrock, the interpreter against a real
#                   model, when credentials are set (not in make test)
#   make check-c    C tests under ASan+UBSan, then valgrind (zero leaks), then fuzzers
#   make lint       luacheck + cppcheck + check-layers (no include or symbol cycle in src/core, src/confine)
#                   + check-lua-layers (no require cycle in lua/ and providers/; providers reach only the kit)
#                   + check-paths (no tracked file reads or cites a path outside the checkout)
#   make bench      every benchmark, then one table of figures beside their references (bench/results/summary.md);
#                   make bench ONLY="startup scale_e2b" runs only those
#   make install PREFIX=/usr/local

PREFIX      ?= /usr/local
LUA_VERSION := 5.4
LUA         ?= lua5.4
CC          ?= gcc
MUSL_CC     ?= musl-gcc
PKG_CONFIG  ?= pkg-config

BUILD   := build
OBJ     := $(BUILD)/obj

LUA_CFLAGS  := $(shell $(PKG_CONFIG) --cflags lua$(LUA_VERSION) 2>/dev/null)
LUA_LIBS    := $(shell $(PKG_CONFIG) --libs lua$(LUA_VERSION) 2>/dev/null)
CURL_LIBS   := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null || echo -lcurl)
ARCH_LIBS   := $(shell $(PKG_CONFIG) --libs libarchive 2>/dev/null || echo -larchive)
CRYPTO_LIBS := $(shell $(PKG_CONFIG) --libs libcrypto 2>/dev/null || echo -lcrypto)
# redis.c: hiredis formats commands and parses replies; libssl drives rediss:// (Debian's hiredis 0.14 has no TLS)
REDIS_LIBS  := $(shell $(PKG_CONFIG) --libs hiredis libssl 2>/dev/null || echo -lhiredis -lssl)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN)
CORE_CFLAGS := $(CFLAGS) -fPIC $(LUA_CFLAGS) -Isrc/core
CORE_LIBS   := $(CURL_LIBS) $(ARCH_LIBS) $(REDIS_LIBS) $(CRYPTO_LIBS) -lm

CORE_SRC := $(sort $(wildcard src/core/*.c))
CORE_HDR := $(wildcard src/core/*.h)
CORE_OBJ := $(CORE_SRC:src/core/%.c=$(OBJ)/core/%.o)

# The core's parts that bring big libraries are shared objects of their own, loaded on first use
# (src/core/part.c): glsb-lua and core.so map only Lua and libc at start. The C tests link everything.
PART_http    := http multi
PART_archive := archive
PART_redis   := redis
PART_digest  := digest
PARTS        := http archive redis digest
LIBS_http    := $(CURL_LIBS)
LIBS_archive := $(ARCH_LIBS)
LIBS_redis   := $(REDIS_LIBS) $(CRYPTO_LIBS)
LIBS_digest  := $(CRYPTO_LIBS)
PART_OBJ     := $(foreach p,$(PARTS),$(PART_$(p):%=$(OBJ)/core/%.o))
BASE_OBJ     := $(filter-out $(PART_OBJ),$(CORE_OBJ))
PART_SO      := $(PARTS:%=$(BUILD)/lib/glsb/core_%.so)

CONFINE_SRC := $(sort $(wildcard src/confine/*.c))
CONFINE_HDR := $(wildcard src/confine/*.h)

# glsb's Lua modules precompiled (src/core/load.c): glsb-lua loads build/luac/<path>.luac instead of
# parsing <path>.lua when it is not older than the source. Compiled by the glsb-lua being built.
LUA_SOURCES := $(sort $(shell find lua providers -name '*.lua' -type f))
LUA_BC      := $(LUA_SOURCES:%.lua=$(BUILD)/luac/%.luac)

# C unit tests: src/tests/test_<name>.c, each linked with the core objects.
CTEST_SRC := $(sort $(wildcard src/tests/test_*.c))
CTEST_BIN := $(CTEST_SRC:src/tests/%.c=$(BUILD)/tests/%)

BUSTED := $(LUA) /usr/bin/busted

.PHONY: install-rock all build deps demo test test-c test-lua test-live test-conformance check-c check-layers lint install uninstall clean rock-test bench

all: $(BUILD)/glsb-lua $(BUILD)/glsb $(BUILD)/lib/glsb/core.so $(PART_SO) $(BUILD)/glsb-confine $(LUA_BC)

INSTALL_DEPS ?= scripts/install-deps

deps:
	@$(INSTALL_DEPS)

# `build` installs what is missing, then builds in a fresh make: this one computed the pkg-config flags
# above when it read the Makefile, before the packages existed (the first `make demo` on a new machine).
build: deps
	@$(MAKE) --no-print-directory all

$(OBJ)/core/%.o: src/core/%.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -c $< -o $@

$(BUILD)/lib/glsb/core.so: $(BASE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(BASE_OBJ) -lm

# A part leaves the core's symbols undefined: they come from glsb-lua or core.so, already loaded.
.SECONDEXPANSION:
$(BUILD)/lib/glsb/core_%.so: $$(addprefix $(OBJ)/core/,$$(addsuffix .o,$$(PART_$$*)))
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^ $(LIBS_$*)

$(OBJ)/glsb_lua.o: src/glsb_lua.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -DGLSB_VERSION='"$(shell cat VERSION)"' -c $< -o $@

$(BUILD)/glsb-lua: $(OBJ)/glsb_lua.o $(BASE_OBJ) VERSION
	$(CC) -rdynamic -o $@ $(OBJ)/glsb_lua.o $(BASE_OBJ) $(LUA_LIBS) -lm -ldl

$(BUILD)/luac/%.luac: %.lua scripts/luac.lua | $(BUILD)/glsb-lua
	@mkdir -p $(dir $@)
	@$(BUILD)/glsb-lua scripts/luac.lua $< $@ $(CURDIR)/$<

# `glsb`, the command for people (docs/cli.md), is glsb-lua called by that name.
$(BUILD)/glsb: $(BUILD)/glsb-lua
	ln -sfn glsb-lua $@

# The confinement helper is static (musl) so it can be copied into remote sandboxes.
# musl ships no Linux uapi headers; the kernel's are libc-independent, so point at them.
KINC := $(BUILD)/kinc
$(KINC)/.stamp:
	@mkdir -p $(KINC)
	ln -sfn /usr/include/linux $(KINC)/linux
	ln -sfn /usr/include/asm-generic $(KINC)/asm-generic
	ln -sfn /usr/include/$(shell $(CC) -dumpmachine)/asm $(KINC)/asm
	@touch $@

CONFINE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Os -isystem $(KINC) -Isrc/confine
$(BUILD)/glsb-confine: $(CONFINE_SRC) $(CONFINE_HDR) $(KINC)/.stamp
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(CONFINE_CFLAGS) -static -o $@ $(CONFINE_SRC)
	strip $@

# A test that says GLSB_WRAP_ALLOC in its first lines gets malloc/realloc/calloc wrapped (failure injection).
WRAP_ALLOC = $(if $(shell head -5 $(1) | grep -l GLSB_WRAP_ALLOC),-Wl$(,)--wrap=malloc$(,)--wrap=realloc$(,)--wrap=calloc)
, := ,
$(BUILD)/tests/%: src/tests/%.c $(CORE_OBJ) $(wildcard src/tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CORE_CFLAGS) -Isrc/tests -o $@ $< $(CORE_OBJ) $(LUA_LIBS) $(CORE_LIBS) $(call WRAP_ALLOC,$<)

demo: build
	$(BUILD)/glsb-lua examples/quickstart.lua
	$(BUILD)/glsb-lua examples/chart.lua $(BUILD)/hist.png
	$(BUILD)/glsb run examples/hello.py

# The whole suite; scripts/test prints the closing `N passed, N failed` line.
test: build
	@scripts/test

test-c: $(CTEST_BIN)
	@scripts/test c

test-lua: all
	@scripts/test lua

# Live runs of the provider contract suite against the real services, when credentials exist:
# OpenSandbox when OPEN_SANDBOX_DOMAIN is set, E2B when E2B_API_KEY is set, Bedrock AgentCore when
# GLSB_LIVE_BEDROCK=1 (credentials from the AWS chain); the interpreter's histogram task against a real
# model when OPENAI_API_KEY, ANTHROPIC_API_KEY or GLSB_LIVE_LM_BASE_URL is set; otherwise one line each
# says it was skipped. Not part of `make test` (which never leaves loopback).
test-live: all
	@rc=0; \
	if [ -n "$$OPEN_SANDBOX_DOMAIN" ]; then \
		$(LUA) /usr/bin/busted --pattern=_live spec/live/opensandbox_live.lua || rc=1; \
	else echo "test-live: opensandbox skipped: OPEN_SANDBOX_DOMAIN is not set (and OPEN_SANDBOX_API_KEY if the server checks one)"; fi; \
	if [ -n "$$E2B_API_KEY" ]; then \
		$(LUA) /usr/bin/busted --pattern=_live spec/live/e2b_live.lua || rc=1; \
	else echo "test-live: e2b skipped: E2B_API_KEY is not set"; fi; \
	if [ "$$GLSB_LIVE_BEDROCK" = 1 ]; then \
		$(LUA) /usr/bin/busted --pattern=_live spec/live/bedrock_live.lua || rc=1; \
	else echo "test-live: bedrock skipped: GLSB_LIVE_BEDROCK=1 is not set (with AWS credentials and AWS_REGION)"; fi; \
	if [ -n "$$OPENAI_API_KEY$$ANTHROPIC_API_KEY$$GLSB_LIVE_LM_BASE_URL" ]; then \
		$(LUA) /usr/bin/busted --pattern=_live spec/live/interpreter_live.lua || rc=1; \
	else echo "test-live: interpreter skipped: none of OPENAI_API_KEY, ANTHROPIC_API_KEY, GLSB_LIVE_LM_BASE_URL is set"; fi; \
	exit $$rc

# ASan+UBSan build of the core and the C tests in a separate tree, then valgrind
# on the plain build's tests, then the fuzz targets for a bounded time.
check-c: deps
	@scripts/check-c

# src/core's and src/confine's parts form layers: no include or symbol cycle between files
# (scripts/check-layers). The confine objects are made for the check only (the helper is built in one
# step above).
CONFINE_OBJ := $(CONFINE_SRC:src/confine/%.c=$(OBJ)/confine/%.o)
$(OBJ)/confine/%.o: src/confine/%.c $(CONFINE_HDR) $(KINC)/.stamp
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(CONFINE_CFLAGS) -c $< -o $@

check-layers: $(CORE_OBJ) $(CONFINE_OBJ)
	@scripts/check-layers $(OBJ)/core src/core
	@rm -f $(filter-out $(CONFINE_OBJ),$(wildcard $(OBJ)/confine/*.o))
	@scripts/check-layers $(OBJ)/confine src/confine

lint: deps
	@$(MAKE) --no-print-directory check-layers
	@scripts/check-paths
	@scripts/check-lua-layers
	luacheck lua providers spec examples bench
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem -D__linux__ -Isrc/core src

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VERSION)/glsb \
		$(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb/providers
	install -m 755 $(BUILD)/glsb-lua $(DESTDIR)$(PREFIX)/bin/glsb-lua
	install -m 755 $(BUILD)/lib/glsb/core.so $(PART_SO) $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VERSION)/glsb/
	install -m 755 $(BUILD)/glsb-confine $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VERSION)/glsb/glsb-confine
	cp -R lua/glsb/. $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb/
	cp -R providers/. $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb/providers/
	@# glsb.pool and glsb.trace were pool.lua and trace.lua before they became pool/init.lua and
	@# trace/init.lua: left by an older install, the file would shadow the folder (?.lua is searched first)
	rm -f $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb/pool.lua $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb/trace.lua
	@# each module's bytecode beside it, under the name the installed glsb-lua finds it by (src/core/load.c)
	cd $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION) && find glsb -name '*.lua' -type f | \
		while read -r f; do echo "$$f $${f}c $(PREFIX)/share/lua/$(LUA_VERSION)/$$f"; done | \
		xargs -n 3 $(CURDIR)/$(BUILD)/glsb-lua $(CURDIR)/scripts/luac.lua
	@# `glsb` (docs/cli.md) is glsb-lua by another name; its completion comes from its own declarations
	ln -sfn glsb-lua $(DESTDIR)$(PREFIX)/bin/glsb
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	$(BUILD)/glsb completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/glsb
	$(BUILD)/glsb completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_glsb

# LuaRocks' layout (rockspec/gl-sandbox-scm-1.rockspec): INST_LIBDIR / INST_LUADIR / INST_BINDIR.
install-rock: all
	install -d $(INST_LIBDIR)/glsb $(INST_LUADIR)/glsb/providers $(INST_BINDIR)
	install -m 755 $(BUILD)/lib/glsb/core.so $(PART_SO) $(INST_LIBDIR)/glsb/
	install -m 755 $(BUILD)/glsb-confine $(INST_LIBDIR)/glsb/glsb-confine
	install -m 755 $(BUILD)/glsb-lua $(INST_BINDIR)/glsb-lua
	ln -sfn glsb-lua $(INST_BINDIR)/glsb
	cp -R lua/glsb/. $(INST_LUADIR)/glsb/
	cp -R providers/. $(INST_LUADIR)/glsb/providers/

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/bin/glsb-lua $(DESTDIR)$(PREFIX)/bin/glsb $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VERSION)/glsb \
		$(DESTDIR)$(PREFIX)/share/lua/$(LUA_VERSION)/glsb \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/glsb $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_glsb

ONLY ?=
# The SDK comparisons (bench/*_roundtrip, scale_e2b, pool_e2b, trace, interpreter, mcp_roundtrip) and the
# emulators they run against load spec/'s pinned npm packages: installed here when missing or older
# than the lock, as make test does.
SPEC_NODE_MODULES := spec/node_modules/.package-lock.json
$(SPEC_NODE_MODULES): spec/package-lock.json
	cd spec && npm ci --no-audit --no-fund --loglevel=error
bench: all $(SPEC_NODE_MODULES)
	$(BUILD)/glsb-lua bench/run.lua $(ONLY)

clean:
	rm -rf $(BUILD)
