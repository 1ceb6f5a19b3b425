/* glsb_lua.c: the glsb-lua interpreter: Lua 5.4 with glsb.core preloaded and glsb's modules on the path. */
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "core.h"
#include "loop.h"

#ifndef GLSB_VERSION
#define GLSB_VERSION "dev"
#endif

static const char usage_text[] =
	"usage: glsb-lua [options] [script [args...]]\n"
	"\n"
	"Runs Lua 5.4 scripts with the glsb sandbox library available (require \"glsb\").\n"
	"\n"
	"  script [args]   run a script file; its arguments are in the global 'arg' as with lua5.4\n"
	"  -               run the script read from standard input\n"
	"  -e CHUNK        run CHUNK (may be repeated; runs before a script)\n"
	"  -i              interactive prompt after running the script (default with no script on a tty)\n"
	"  --doctor        print which confinement features this machine offers the local provider\n"
	"  --gc [DIR...]   remove what local sandboxes of killed owners left (workspaces, cgroup leaves)\n"
	"  --mcp [--provider NAME] [--config FILE]\n"
	"                  serve sandboxes to an MCP client (Claude Code, ...) on stdin/stdout\n"
	"  -v, --version   print the version\n"
	"  -h, --help      print this help\n"
	"\n"
	"The global 'glsb' is require \"glsb\", loaded on first use (scripts, -e and the prompt).\n"
	"At the prompt: line editing and history (libedit, when installed), Ctrl-C interrupts the running\n"
	"call and keeps the session.\n"
	"\n"
	"environment:\n"
	"  GLSB_PATH       colon-separated folders of extra provider modules (searched first)\n"
	"  GLSB_HISTORY    the prompt's history file (default ~/.glsb_lua_history; empty: none)\n"
	"  GLSB_CONFINE    path of the glsb-confine helper (default: found next to glsb-lua)\n"
	"\n"
	"example:\n"
	"  glsb-lua -e 'local glsb = require \"glsb\"; print(glsb.create():execute_code(\"print(6*7)\").stdout)'\n";

/* Directory holding this executable, via /proc/self/exe. */
static int exe_dir(char *out, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", out, size - 1);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	char *slash = strrchr(out, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

static int is_dir(const char *path)
{
	return access(path, R_OK | X_OK) == 0;
}

/* Prepends glsb's module folders to package.path: the source tree (build/glsb-lua -> ../lua) and the
 * installed layout (PREFIX/bin/glsb-lua -> PREFIX/share/lua/5.4), as canonical paths, and registers
 * where their precompiled bytecode is (src/core/load.c): the build's build/luac/{lua,providers}/ (made
 * by `make`), the installed tree's .luac files beside its sources (made by `make install`). */
static void add_folder(lua_State *L, luaL_Buffer *b, const char *folder, const char *bytecode)
{
	char real[PATH_MAX];
	if (!is_dir(folder) || !realpath(folder, real))
		return;
	lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", real, real);
	luaL_addvalue(b);
	if (bytecode)
		glsb_load_add_root(real, bytecode);
}

static void set_paths(lua_State *L)
{
	char dir[PATH_MAX], cand[PATH_MAX + 64], bc[PATH_MAX + 64], real[PATH_MAX];
	luaL_Buffer b;
	if (exe_dir(dir, sizeof dir) != 0)
		return;
	lua_getglobal(L, "package");
	luaL_buffinit(L, &b);
	snprintf(bc, sizeof bc, "%s/luac", dir);
	int built = is_dir(bc);
	snprintf(bc, sizeof bc, "%s/luac/lua", dir);
	snprintf(cand, sizeof cand, "%s/../lua", dir);
	add_folder(L, &b, cand, built ? bc : NULL);
	/* the checkout's providers/ are found by glsb.registry (../../providers from lua/glsb/registry.lua) */
	snprintf(cand, sizeof cand, "%s/../providers", dir);
	snprintf(bc, sizeof bc, "%s/luac/providers", dir);
	if (built && is_dir(cand) && realpath(cand, real))
		glsb_load_add_root(real, bc);
	snprintf(cand, sizeof cand, "%s/../share/lua/" LUA_VERSION_MAJOR "." LUA_VERSION_MINOR, dir);
	if (is_dir(cand) && realpath(cand, real))
		add_folder(L, &b, real, real);
	lua_getfield(L, -2, "path");
	luaL_addvalue(&b);
	luaL_pushresult(&b);
	lua_setfield(L, -2, "path");
	lua_pop(L, 1);
	glsb_load_install_searcher(L);
}

static void preload_core(lua_State *L)
{
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
	lua_pushcfunction(L, luaopen_glsb_core);
	lua_setfield(L, -2, "glsb.core");
	lua_pop(L, 1);
}

/* Error handler: glsb errors print through their __tostring (class, stage, message, cause); other
 * errors get a traceback. */
static int msghandler(lua_State *L)
{
	if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
		return 1;
	const char *msg = lua_tostring(L, 1);
	if (!msg)
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	luaL_traceback(L, L, msg, 1);
	return 1;
}

static int report(lua_State *L, int status)
{
	if (status != LUA_OK) {
		fprintf(stderr, "glsb-lua: %s\n", lua_tostring(L, -1));
		fflush(stderr);
		lua_pop(L, 1);
	}
	return status;
}

/*
 * Ctrl-C, as lua.c does it: the first SIGINT during a call makes the call raise "interrupted!", a second
 * one ends the process. The error is raised where it cannot break the scheduler's bookkeeping: by
 * core.poll before it hands out anything (a call waiting on the loop sleeps there), or by a hook on the
 * next Lua instruction outside glsb/loop.lua (a call computing in Lua). Tasks the call started stay on
 * the loop, and the Lua state (the prompt's variables) stays as it was.
 */
static lua_State *running_L;

static void interrupt_hook(lua_State *L, lua_Debug *ar)
{
	if (lua_getinfo(L, "S", ar) && strstr(ar->source, "glsb/loop.lua"))
		return; /* mid-step: try again on the next instruction */
	lua_sethook(L, NULL, 0, 0);
	glsb_loop_interrupted();
	luaL_error(L, "interrupted!");
}

static void on_sigint(int sig)
{
	signal(sig, SIG_DFL); /* a second Ctrl-C ends the process */
	glsb_loop_interrupt();
	lua_sethook(running_L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT, 1);
}

static int docall(lua_State *L, int nargs, int nres)
{
	int base = lua_gettop(L) - nargs;
	struct sigaction sa, old;

	lua_pushcfunction(L, msghandler);
	lua_insert(L, base);
	running_L = L;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint; /* no SA_RESTART: a blocked wait returns at once */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old);
	int status = lua_pcall(L, nargs, nres, base);
	sigaction(SIGINT, &old, NULL);
	lua_sethook(L, NULL, 0, 0);
	glsb_loop_interrupted(); /* a Ctrl-C that came as the call ended is spent */
	lua_remove(L, base);
	return status;
}

static int dostring(lua_State *L, const char *s, const char *name)
{
	int status = luaL_loadbuffer(L, s, strlen(s), name);
	if (status == LUA_OK)
		status = docall(L, 0, 0);
	return report(L, status);
}

/* The global 'arg', as lua.c builds it: arg[0] = script, arg[1..] = its arguments, negatives before. */
static void create_arg(lua_State *L, char **argv, int argc, int script)
{
	lua_createtable(L, argc - script, script + 1);
	for (int i = 0; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - script);
	}
	lua_setglobal(L, "arg");
}

static int run_script(lua_State *L, const char *fname, char **argv, int argc, int script)
{
	int status = luaL_loadfile(L, strcmp(fname, "-") == 0 ? NULL : fname);
	if (status == LUA_OK) {
		int n = argc - script - 1;
		luaL_checkstack(L, n, "too many arguments to script");
		for (int i = script + 1; i < argc; i++)
			lua_pushstring(L, argv[i]);
		status = docall(L, n, 0);
	}
	return report(L, status);
}

/* A syntax error that only says the chunk ended early ("... near <eof>"): wait for more lines. */
static int incomplete(lua_State *L, int status)
{
	static const char eof[] = "<eof>";
	size_t len;
	const char *msg = lua_tolstring(L, -1, &len);
	if (status == LUA_ERRSYNTAX && msg && len >= sizeof eof - 1 && !strcmp(msg + len - (sizeof eof - 1), eof)) {
		lua_pop(L, 1);
		return 1;
	}
	return 0;
}

/*
 * Line editing and history come from libedit (BSD-licensed, like glsb; its readline interface), opened
 * only when the prompt starts, so scripts never load it. Without it the prompt reads plain lines.
 */
static struct {
	char *(*readline)(const char *prompt);
	int (*add_history)(const char *line);
	int (*read_history)(const char *file);
	int (*write_history)(const char *file);
	char history[PATH_MAX];
} editor;

static void editor_open(void)
{
	static const char *const libs[] = {"libedit.so.2", "libedit.so", NULL};
	void *h = NULL;
	for (int i = 0; libs[i] && !h; i++)
		h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&editor.readline = dlsym(h, "readline");
	*(void **)&editor.add_history = dlsym(h, "add_history");
	*(void **)&editor.read_history = dlsym(h, "read_history");
	*(void **)&editor.write_history = dlsym(h, "write_history");
	if (!editor.readline || !editor.add_history) {
		editor.readline = NULL;
		return;
	}
	const char *file = getenv("GLSB_HISTORY"), *home = getenv("HOME");
	if (file)
		snprintf(editor.history, sizeof editor.history, "%s", file);
	else if (home && *home)
		snprintf(editor.history, sizeof editor.history, "%s/.glsb_lua_history", home);
	if (editor.history[0] && editor.read_history)
		editor.read_history(editor.history);
}

static void editor_close(void)
{
	if (editor.readline && editor.history[0] && editor.write_history)
		editor.write_history(editor.history);
}

static int read_line(const char *prompt, char *line, size_t size)
{
	if (editor.readline) {
		char *got = editor.readline(prompt);
		if (!got)
			return 0;
		snprintf(line, size, "%s", got);
		if (got[0])
			editor.add_history(got);
		free(got);
		return 1;
	}
	fputs(prompt, stdout);
	fflush(stdout);
	if (!fgets(line, (int)size, stdin))
		return 0;
	line[strcspn(line, "\n")] = '\0';
	if (strchr(line, '\033')) {
		/* an arrow key's escape sequence, which Lua would take for a binary chunk */
		fputs("glsb-lua: no line editing here (libedit is not installed); the line was ignored\n", stderr);
		line[0] = '\0';
	}
	return 1;
}

/* Loads what the user types: an expression prints its values (tried as "return <line>" first), a
 * statement just runs, and an unfinished one ("for i = 1, 3 do") continues on the next lines. */
static int load_input(lua_State *L, char *line, size_t size)
{
	const char *ret = lua_pushfstring(L, "return %s", line);
	if (luaL_loadbuffer(L, ret, strlen(ret), "=stdin") == LUA_OK) {
		lua_remove(L, -2);
		return LUA_OK;
	}
	lua_pop(L, 2);
	lua_pushstring(L, line);
	for (;;) {
		size_t len;
		const char *chunk = lua_tolstring(L, -1, &len);
		int status = luaL_loadbuffer(L, chunk, len, "=stdin");
		if (!incomplete(L, status)) {
			lua_remove(L, -2);
			return status;
		}
		if (!read_line(">> ", line, size)) {
			lua_pop(L, 1);
			lua_pushliteral(L, "stdin: unfinished chunk at end of input");
			return LUA_ERRSYNTAX;
		}
		lua_pushliteral(L, "\n");
		lua_pushstring(L, line);
		lua_concat(L, 3);
	}
}

/* A small line REPL, as lua.c's. */
static void repl(lua_State *L)
{
	char line[8192];
	printf("glsb-lua %s (%s) - require \"glsb\" is loaded as 'glsb'\n", GLSB_VERSION, LUA_RELEASE);
	dostring(L, "glsb = require 'glsb'", "=repl");
	editor_open();
	while (read_line("> ", line, sizeof line)) {
		if (!line[0])
			continue;
		lua_settop(L, 0);
		if (report(L, load_input(L, line, sizeof line)) != LUA_OK)
			continue;
		if (report(L, docall(L, 0, LUA_MULTRET)) != LUA_OK)
			continue;
		int n = lua_gettop(L);
		if (n > 0) {
			lua_getglobal(L, "print");
			lua_insert(L, 1);
			report(L, docall(L, n, 0));
		}
	}
	putchar('\n');
	editor_close();
}

/*
 * Lua's blocks of 4 MiB or more (a download's string, a big table) are mapped on their own, and the last
 * one freed (up to 256 MiB) is kept for the next, its pages given back lazily (MADV_FREE): a block made
 * again before the kernel needs them is neither faulted in nor zeroed again. glibc unmaps such blocks at
 * once, so a 100 MB string made after another was freed faulted 25,600 fresh pages in (60 to 90 ms of a
 * 100 MB download here, more than the copy). Huge pages were tried and dropped: fewer faults, but on
 * this machine a fresh 2 MiB page took up to hundreds of milliseconds now and then. Smaller blocks go to
 * Lua's own allocator. Lua passes every block's size back when it frees or resizes it, so a size says
 * how it was made.
 */
#define BIG_BLOCK (4u << 20)
#define BLOCK_ROUND (2u << 20) /* mapped sizes are rounded to this: a block resized a little stays put */
#define KEEP_MAX ((size_t)256 << 20)

static lua_Alloc base_alloc;
static void *base_ud;
static struct {
	char *ptr;
	size_t size;
} kept;

static size_t mapped(size_t n)
{
	return (n + BLOCK_ROUND - 1) & ~(size_t)(BLOCK_ROUND - 1);
}

static void *map_block(size_t n)
{
	size_t want = mapped(n);
	if (kept.ptr) {
		char *m = kept.ptr;
		size_t have = kept.size;
		kept.ptr = NULL;
		if (have >= want) {
			if (have > want)
				munmap(m + want, have - want);
			return m;
		}
		void *grown = mremap(m, have, want, MREMAP_MAYMOVE);
		if (grown != MAP_FAILED)
			return grown;
		munmap(m, have);
	}
	void *m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	return m;
}

static void unmap_block(void *ptr, size_t n)
{
	size_t size = mapped(n);
	if (size <= KEEP_MAX && (!kept.ptr || kept.size < size)) {
		if (kept.ptr)
			munmap(kept.ptr, kept.size);
		madvise(ptr, size, MADV_FREE);
		kept.ptr = ptr;
		kept.size = size;
		return;
	}
	munmap(ptr, size);
}

static void *glsb_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	int was_big = ptr != NULL && osize >= BIG_BLOCK; /* with ptr NULL, osize is a type tag */
	int big = nsize >= BIG_BLOCK;
	if (!was_big && !big)
		return base_alloc(base_ud, ptr, osize, nsize);
	if (nsize == 0) {
		unmap_block(ptr, osize);
		return NULL;
	}
	if (was_big && big) {
		if (mapped(osize) == mapped(nsize))
			return ptr;
		void *m = mremap(ptr, mapped(osize), mapped(nsize), MREMAP_MAYMOVE);
		return m == MAP_FAILED ? NULL : m;
	}
	void *m = big ? map_block(nsize) : base_alloc(base_ud, NULL, 0, nsize);
	if (!m)
		return NULL;
	if (ptr) {
		memcpy(m, ptr, osize < nsize ? osize : nsize);
		if (was_big)
			unmap_block(ptr, osize);
		else
			base_alloc(base_ud, ptr, osize, 0);
	}
	(void)ud;
	return m;
}

/* `glsb`, the command for people (lua/glsb/cli, docs/cli.md), is this program called by that name (a link
 * to glsb-lua): glsb.cli.main gets the arguments and returns the exit status. Sandboxes a command left
 * open are closed as a script's are. */
static int is_cli(const char *argv0)
{
	const char *base = argv0 ? strrchr(argv0, '/') : NULL;
	base = base ? base + 1 : argv0;
	return base && !strcmp(base, "glsb");
}

static int cli_main(lua_State *L, int argc, char **argv)
{
	int code = 1;
	create_arg(L, argv, argc, 0);
	int status = luaL_loadstring(L, "return require('glsb.cli').main(arg)");
	if (status == LUA_OK)
		status = docall(L, 0, 1);
	if (report(L, status) == LUA_OK) {
		code = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 1;
		lua_pop(L, 1);
	}
	dostring(L, "local s = package.loaded['glsb.sandbox'] if s then s.close_all() end", "=exit");
	lua_close(L);
	return code;
}

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	if (!L) {
		fputs("glsb-lua: cannot create a Lua state\n", stderr);
		return 1;
	}
	/* no block of BIG_BLOCK bytes exists yet: every later free finds the allocator that made its block */
	base_alloc = lua_getallocf(L, &base_ud);
	lua_setallocf(L, glsb_alloc, NULL);
	luaL_openlibs(L);
	preload_core(L);
	set_paths(L);
	/* The provider searcher (GLSB_PATH, the source tree's providers/), so that
	 * require "glsb.providers.x" works before require "glsb" as it does installed. glsb.registry
	 * installs it; until a provider module is asked for, a stand-in keeps its place (loading the
	 * registry at start would cost every script that never names a provider). It changes no list
	 * while require walks it, and steps aside once the registry is loaded. */
	dostring(L, "table.insert(package.searchers, 2, function(name)\n"
		    "  if name:sub(1, 15) ~= 'glsb.providers.' or package.loaded['glsb.registry'] then return nil end\n"
		    "  local ok, registry = pcall(require, 'glsb.registry') -- which puts its searcher first\n"
		    "  if not ok then return '\\n\\tglsb.registry: ' .. tostring(registry) end\n"
		    "  return registry.searcher(name)\n"
		    "end)", "=paths");
	/* The global 'glsb' (README examples use it in scripts as at the prompt), loaded on first use so a
	 * script that never touches it does not pay for it: _G's __index answers that one name. */
	dostring(L, "setmetatable(_G, { __index = function(g, k)\n"
		    "  if k == 'glsb' then local m = require 'glsb'; rawset(g, 'glsb', m); return m end\n"
		    "end })", "=glsb");

	if (argc > 0 && is_cli(argv[0]))
		return cli_main(L, argc, argv);

	int script = 0, interactive = 0, ran_chunk = 0, status = LUA_OK;
	for (int i = 1; i < argc && !script; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			lua_close(L);
			return 0;
		} else if (!strcmp(a, "-v") || !strcmp(a, "--version")) {
			printf("glsb-lua %s (%s)\n", GLSB_VERSION, LUA_RELEASE);
			lua_close(L);
			return 0;
		} else if (!strcmp(a, "--doctor")) {
			status = dostring(L, "require('glsb.doctor').main()", "=doctor");
			lua_close(L);
			return status == LUA_OK ? 0 : 1;
		} else if (!strcmp(a, "--gc")) {
			create_arg(L, argv, argc, i);
			status = dostring(L, "require('glsb.providers.local.reaper').main(arg)", "=gc");
			lua_close(L);
			return status == LUA_OK ? 0 : 1;
		} else if (!strcmp(a, "--mcp")) {
			/* stdin/stdout carry the protocol; glsb.mcp ends its sandboxes before it returns */
			create_arg(L, argv, argc, i);
			status = dostring(L, "require('glsb.mcp').main(arg)", "=mcp");
			dostring(L, "local s = package.loaded['glsb.sandbox'] if s then s.close_all() end", "=exit");
			lua_close(L);
			return status == LUA_OK ? 0 : 1;
		} else if (!strcmp(a, "-i")) {
			interactive = 1;
		} else if (!strcmp(a, "-e")) {
			if (++i >= argc) {
				fputs("glsb-lua: '-e' needs an argument\n", stderr);
				lua_close(L);
				return 2;
			}
			create_arg(L, argv, argc, 0);
			ran_chunk = 1;
			if ((status = dostring(L, argv[i], "=(command line)")) != LUA_OK)
				break;
		} else if (!strcmp(a, "-") || a[0] != '-') {
			script = i;
		} else {
			fprintf(stderr, "glsb-lua: unknown option '%s'\n%s", a, usage_text);
			lua_close(L);
			return 2;
		}
	}
	if (status == LUA_OK && script) {
		create_arg(L, argv, argc, script);
		status = run_script(L, argv[script], argv, argc, script);
	}
	if (status == LUA_OK && (interactive || (!script && !ran_chunk))) {
		if (isatty(STDIN_FILENO)) {
			create_arg(L, argv, argc, 0);
			repl(L);
		} else if (!interactive) {
			create_arg(L, argv, argc, 0);
			status = run_script(L, "-", argv, 1, 0); /* like lua5.4: no tty, read the script from stdin */
		}
	}
	/* Sandboxes the script left open (it ended normally or by an error) are terminated, unless created
	 * with keep_alive = true: lua/glsb/sandbox.lua close_all. Nothing to do if glsb was never used. */
	dostring(L, "local s = package.loaded['glsb.sandbox'] if s then s.close_all() end", "=exit");
	lua_close(L);
	return status == LUA_OK ? 0 : 1;
}
