/* archive.c: tar and tar.gz in memory through libarchive: a deterministic pack, and an unpack that refuses anything that could land outside its root. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "codes.h"
#include "core.h"

GLSB_PART_DEFINE();

#define BOX_MT "glsb.TarBox"
#define DEFAULT_MAX_BYTES ((lua_Integer)1 << 30)
#define DEFAULT_MAX_ENTRIES 100000
#define MAX_LINK_HOPS 40 /* as the kernel's MAXSYMLINKS */

/*
 * Everything C-allocated during one call lives in a box userdata, so a Lua error raised
 * halfway (misuse, out of memory) frees it through __gc; the normal paths free it at once.
 */
struct tarbox {
	struct archive *a;
	struct archive_entry *e;
	int writing;
	char *out;          /* pack: the archive bytes */
	size_t outlen, outcap;
	char *s[2];         /* scratch strings: names, link resolution */
	size_t scap[2];
};

static void box_release(struct tarbox *b)
{
	if (b->a) {
		if (b->writing)
			archive_write_free(b->a);
		else
			archive_read_free(b->a);
		b->a = NULL;
	}
	if (b->e) {
		archive_entry_free(b->e);
		b->e = NULL;
	}
	free(b->out);
	b->out = NULL;
	free(b->s[0]);
	free(b->s[1]);
	b->s[0] = b->s[1] = NULL;
	b->scap[0] = b->scap[1] = 0;
}

static int box_gc(lua_State *L)
{
	box_release(luaL_checkudata(L, 1, BOX_MT));
	return 0;
}

static struct tarbox *box_new(lua_State *L)
{
	struct tarbox *b = lua_newuserdatauv(L, sizeof *b, 0);

	memset(b, 0, sizeof *b);
	if (luaL_newmetatable(L, BOX_MT)) {
		lua_pushcfunction(L, box_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	return b;
}

/* Scratch string i with room for n bytes; raises on out of memory (the box frees the rest). */
static char *scratch(lua_State *L, struct tarbox *b, int i, size_t n)
{
	if (n > b->scap[i]) {
		size_t cap = b->scap[i] ? b->scap[i] : 256;
		char *p;
		while (cap < n)
			cap *= 2;
		p = realloc(b->s[i], cap);
		if (!p)
			luaL_error(L, "tar: out of memory");
		b->s[i] = p;
		b->scap[i] = cap;
	}
	return b->s[i];
}

/*
 * The canonical form of an archive path: components joined by single slashes, without
 * "." components or leading "./" or trailing slash. Writes it to out (room for n + 1) and
 * returns NULL, or returns why the path is refused: absolute, or a ".." component.
 */
static const char *normalize(const char *in, size_t n, char *out, size_t *outlen)
{
	size_t i = 0, o = 0;

	if (n > 0 && in[0] == '/')
		return "absolute name";
	while (i < n) {
		size_t j = i;
		while (j < n && in[j] != '/')
			j++;
		if (j - i == 2 && in[i] == '.' && in[i + 1] == '.')
			return "'..' component";
		if (j > i && !(j - i == 1 && in[i] == '.')) {
			if (o)
				out[o++] = '/';
			memcpy(out + o, in + i, j - i);
			o += j - i;
		}
		i = j + 1;
	}
	out[o] = '\0';
	*outlen = o;
	return NULL;
}

/* ---- pack ---- */

static la_ssize_t pack_write(struct archive *a, void *ud, const void *buf, size_t n)
{
	struct tarbox *b = ud;

	if (n > b->outcap - b->outlen) {
		size_t cap = b->outcap ? b->outcap : 16384;
		char *p;
		while (cap - b->outlen < n)
			cap *= 2;
		p = realloc(b->out, cap);
		if (!p) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		b->out = p;
		b->outcap = cap;
	}
	memcpy(b->out + b->outlen, buf, n);
	b->outlen += n;
	return (la_ssize_t)n;
}

static const char *const TYPES[] = {"file", "dir", "symlink", "hardlink", NULL};
enum { T_FILE, T_DIR, T_SYMLINK, T_HARDLINK };

/* Field k of the entry table at index t as a string (NULL when absent); raises on a non-string. */
static const char *entry_string(lua_State *L, int t, const char *k, size_t *n, lua_Integer i)
{
	const char *s;

	lua_getfield(L, t, k);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return NULL;
	}
	if (lua_type(L, -1) != LUA_TSTRING)
		luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I: %s must be a string)", i, k);
	s = lua_tolstring(L, -1, n);
	lua_pop(L, 1); /* still referenced from the entry table */
	return s;
}

static int pack_fail(lua_State *L, struct tarbox *b)
{
	lua_pushnil(L);
	lua_pushfstring(L, "tar_pack: %s", archive_error_string(b->a) ? archive_error_string(b->a) : "libarchive failed");
	lua_pushstring(L, glsb_code_name(GLSB_TAR_WRITE_FAILED));
	box_release(b);
	return 3;
}

/*
 * core.tar_pack(entries [, {gzip = bool}]) -> archive bytes. Deterministic: pax (ustar
 * headers, pax records only where ustar cannot say it), mtime 0, uid/gid 0, no user or group
 * names, entries in the given order, and the gzip header without a timestamp, so the same
 * entries always give the same bytes (content-addressed templates hash them).
 */
static int pack_impl(lua_State *L)
{
	int gzip = 0;
	lua_Integer i, n;
	struct tarbox *b;

	if (lua_istable(L, 2)) {
		lua_getfield(L, 2, "gzip");
		gzip = lua_toboolean(L, -1);
		lua_pop(L, 1);
	}
	n = luaL_len(L, 1);
	b = box_new(L);
	b->writing = 1;
	if (!(b->a = archive_write_new()) || !(b->e = archive_entry_new()))
		return luaL_error(L, "tar_pack: out of memory");
	if (archive_write_set_format_pax_restricted(b->a) != ARCHIVE_OK)
		return pack_fail(L, b);
	if (gzip) {
		if (archive_write_add_filter_gzip(b->a) != ARCHIVE_OK ||
		    archive_write_set_filter_option(b->a, "gzip", "timestamp", NULL) != ARCHIVE_OK)
			return pack_fail(L, b);
		/* No zero padding after the gzip stream: some readers call it trailing garbage. */
		archive_write_set_bytes_in_last_block(b->a, 1);
	}
	if (archive_write_open2(b->a, b, NULL, pack_write, NULL, NULL) != ARCHIVE_OK)
		return pack_fail(L, b);

	for (i = 1; i <= n; i++) {
		size_t nlen, dlen = 0, tlen = 0, clen;
		const char *name, *data, *target, *why;
		int type, isnum;
		lua_Integer mode;
		char *canon;

		if (lua_geti(L, 1, i) != LUA_TTABLE)
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I is not a table)", i);
		lua_getfield(L, -1, "type");
		if (lua_isnil(L, -1)) {
			type = T_FILE;
		} else {
			const char *t = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
			for (type = 0; TYPES[type] && strcmp(TYPES[type], t) != 0; type++)
				;
			if (!TYPES[type])
				return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I: type must be "
						  "\"file\", \"dir\", \"symlink\" or \"hardlink\")", i);
		}
		lua_pop(L, 1);
		name = entry_string(L, -1, "name", &nlen, i);
		if (!name || nlen == 0)
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I: name must be a non-empty string)", i);
		if (memchr(name, '\0', nlen))
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I: name contains NUL)", i);
		canon = scratch(L, b, 0, nlen + 1);
		why = normalize(name, nlen, canon, &clen);
		if (!why && clen == 0)
			why = "empty name";
		if (why)
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I '%s': %s)", i, name, why);
		data = entry_string(L, -1, "data", &dlen, i);
		target = entry_string(L, -1, "target", &tlen, i);
		if ((type == T_SYMLINK || type == T_HARDLINK) &&
		    (!target || tlen == 0 || memchr(target, '\0', tlen)))
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I '%s': a %s needs a target without NUL)",
					  i, name, TYPES[type]);
		lua_getfield(L, -1, "mode");
		mode = lua_tointegerx(L, -1, &isnum);
		if (lua_isnil(L, -1))
			mode = type == T_DIR ? 0755 : type == T_SYMLINK ? 0777 : 0644;
		else if (!isnum || mode < 0 || mode > 07777)
			return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I '%s': mode must be an integer in 0..07777)",
					  i, name);
		lua_pop(L, 2); /* mode, entry */

		archive_entry_clear(b->e);
		archive_entry_copy_pathname(b->e, canon);
		archive_entry_set_perm(b->e, (mode_t)mode);
		archive_entry_set_mtime(b->e, 0, 0);
		archive_entry_set_uid(b->e, 0);
		archive_entry_set_gid(b->e, 0);
		switch (type) {
		case T_FILE:
			archive_entry_set_filetype(b->e, AE_IFREG);
			archive_entry_set_size(b->e, (la_int64_t)dlen);
			break;
		case T_DIR:
			archive_entry_set_filetype(b->e, AE_IFDIR);
			archive_entry_set_size(b->e, 0);
			break;
		case T_SYMLINK:
			archive_entry_set_filetype(b->e, AE_IFLNK);
			archive_entry_copy_symlink(b->e, target);
			archive_entry_set_size(b->e, 0);
			break;
		default: /* T_HARDLINK: the target is an archive path, normalized like names */
			canon = scratch(L, b, 1, tlen + 1);
			why = normalize(target, tlen, canon, &clen);
			if (why || clen == 0)
				return luaL_error(L, "bad argument #1 to 'tar_pack' (entry %I '%s': hardlink target: %s)",
						  i, name, why ? why : "empty");
			archive_entry_set_filetype(b->e, AE_IFREG);
			archive_entry_copy_hardlink(b->e, canon);
			archive_entry_set_size(b->e, 0);
			break;
		}
		if (archive_write_header(b->a, b->e) < ARCHIVE_WARN)
			return pack_fail(L, b);
		if (type == T_FILE && dlen > 0 &&
		    archive_write_data(b->a, data, dlen) != (la_ssize_t)dlen)
			return pack_fail(L, b);
	}
	if (archive_write_close(b->a) != ARCHIVE_OK)
		return pack_fail(L, b);
	lua_pushlstring(L, b->out ? b->out : "", b->outlen);
	box_release(b);
	return 1;
}

/* ---- unpack ---- */

/* Stack slots of l_tar_unpack. */
enum { U_DATA = 1, U_OPTS, U_BOX, U_RESULT, U_NAMES, U_LINKS };

static lua_Integer opt_limit(lua_State *L, const char *k, lua_Integer def)
{
	lua_Integer v;
	int isnum;

	if (lua_isnoneornil(L, U_OPTS))
		return def;
	lua_getfield(L, U_OPTS, k);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return def;
	}
	v = lua_tointegerx(L, -1, &isnum);
	if (!isnum || v < 0)
		luaL_error(L, "bad argument #2 to 'tar_unpack' (%s must be a non-negative integer)", k);
	lua_pop(L, 1);
	return v;
}

/* Pushes nil, the message already on top of the stack and code, after freeing the archive. */
static int unpack_fail(lua_State *L, struct tarbox *b, enum glsb_code code)
{
	box_release(b);
	lua_pushnil(L);
	lua_insert(L, -2);
	lua_pushstring(L, glsb_code_name(code));
	return 3;
}

/*
 * Where the symlink `name` -> `target` ends up, resolved like the kernel would inside an
 * empty root holding just this archive: relative to the link's directory, following every
 * other symlink of the archive (links chain: "a" -> "." is harmless alone, but makes
 * "b" -> "a/a/.." climb out). Returns NULL when it stays inside, or why not.
 */
static const char *link_escapes(lua_State *L, struct tarbox *b, const char *name, const char *target)
{
	size_t tlen = strlen(target), cur = 0, pos = 0, rlen;
	const char *slash = strrchr(name, '/');
	size_t dlen = slash ? (size_t)(slash - name) : 0;
	int hops = 0;
	char *rest, *path;

	if (target[0] == '/')
		return "target is absolute";
	/* rest: what is left to walk; path (scratch 1): the directory reached so far */
	rest = scratch(L, b, 0, dlen + 1 + tlen + 1);
	memcpy(rest, name, dlen);
	rest[dlen] = '/';
	memcpy(rest + dlen + 1, target, tlen + 1);
	rlen = dlen + 1 + tlen;
	path = scratch(L, b, 1, rlen + 1);
	path[0] = '\0';
	while (pos < rlen) {
		size_t start = pos, clen;
		while (pos < rlen && rest[pos] != '/')
			pos++;
		clen = pos - start;
		pos++; /* past the slash */
		if (clen == 0 || (clen == 1 && rest[start] == '.'))
			continue;
		if (clen == 2 && rest[start] == '.' && rest[start + 1] == '.') {
			char *up;
			if (cur == 0)
				return "target escapes the archive root";
			path[cur] = '\0';
			up = strrchr(path, '/');
			cur = up ? (size_t)(up - path) : 0;
			path[cur] = '\0';
			continue;
		}
		/* path/component: a symlink of the archive? */
		path = scratch(L, b, 1, cur + 1 + clen + 1);
		rest = b->s[0];
		if (cur)
			path[cur] = '/';
		memcpy(path + cur + (cur ? 1 : 0), rest + start, clen);
		path[cur + (cur ? 1 : 0) + clen] = '\0';
		if (lua_getfield(L, U_LINKS, path) == LUA_TSTRING) {
			size_t llen;
			const char *link = lua_tolstring(L, -1, &llen);
			size_t left = pos < rlen ? rlen - pos : 0;
			char *nrest;
			if (++hops > MAX_LINK_HOPS) {
				lua_pop(L, 1);
				return "too many levels of symlinks";
			}
			if (link[0] == '/') {
				lua_pop(L, 1);
				return "target resolves through an absolute symlink";
			}
			/* rest := link "/" rest-after-this-component; path stays the link's directory */
			nrest = malloc(llen + 1 + left + 1);
			if (!nrest) {
				lua_pop(L, 1);
				luaL_error(L, "tar_unpack: out of memory");
			}
			memcpy(nrest, link, llen);
			nrest[llen] = '/';
			memcpy(nrest + llen + 1, b->s[0] + (rlen - left), left);
			nrest[llen + 1 + left] = '\0';
			lua_pop(L, 1);
			free(b->s[0]);
			b->s[0] = nrest;
			b->scap[0] = llen + 1 + left + 1;
			rest = nrest;
			rlen = llen + 1 + left;
			pos = 0;
			path = b->s[1];
			path[cur] = '\0';
		} else {
			lua_pop(L, 1);
			cur += (cur ? 1 : 0) + clen;
		}
	}
	return NULL;
}

/* Reads the data of the current entry into a new string on the stack; *total counts all bytes.
 * Returns 0, or the failure's code with the message on the stack. */
static enum glsb_code read_data(lua_State *L, struct tarbox *b, struct archive_entry *e, lua_Integer *total,
		     lua_Integer max, const char *name)
{
	luaL_Buffer buf;
	la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;

	if (size < 0 || size > max - *total) {
		lua_pushfstring(L, "tar_unpack: entry '%s': more than max_bytes (%I) bytes in the archive", name, max);
		return GLSB_TAR_TOO_LARGE;
	}
	luaL_buffinit(L, &buf);
	for (;;) {
		char *p = luaL_prepbuffer(&buf);
		la_ssize_t r = archive_read_data(b->a, p, LUAL_BUFFERSIZE);
		if (r == 0)
			break;
		if (r < 0) {
			lua_pushfstring(L, "tar_unpack: entry '%s': %s", name, archive_error_string(b->a));
			return GLSB_TAR_CORRUPT;
		}
		if (r > max - *total) {
			lua_pushfstring(L, "tar_unpack: entry '%s': more than max_bytes (%I) bytes in the archive", name, max);
			return GLSB_TAR_TOO_LARGE;
		}
		*total += r;
		luaL_addsize(&buf, (size_t)r);
	}
	luaL_pushresult(&buf);
	return GLSB_NO_CODE;
}

/*
 * core.tar_unpack(data [, {max_bytes, max_entries}]) -> array of entries
 * {name, type, mode, data | target}, or nil, message naming the entry and the reason, code.
 * Input is a tar, gzipped or not. Refused: absolute names, ".." components, empty names,
 * symlinks with an absolute target or one that resolves outside the archive root, hardlinks
 * to anything but an earlier non-directory entry, devices, fifos and sockets, a name used
 * both by a symlink and something else, and more data or entries than the limits (default
 * 1 GiB, 100000). Names come back canonical ("./a//b/" is "a/b"); a "." directory entry is
 * skipped.
 */
static int unpack_impl(lua_State *L)
{
	size_t len;
	const char *data = lua_tolstring(L, U_DATA, &len);
	lua_Integer max_bytes, max_entries, total = 0, count = 0, out = 0, i;
	struct tarbox *b;

	max_bytes = opt_limit(L, "max_bytes", DEFAULT_MAX_BYTES);
	max_entries = opt_limit(L, "max_entries", DEFAULT_MAX_ENTRIES);
	lua_settop(L, U_OPTS);
	b = box_new(L);     /* U_BOX */
	lua_newtable(L);    /* U_RESULT */
	lua_newtable(L);    /* U_NAMES: canonical name -> type of the last entry so named */
	lua_newtable(L);    /* U_LINKS: canonical symlink name -> target */
	if (!(b->a = archive_read_new()))
		return luaL_error(L, "tar_unpack: out of memory");
	archive_read_support_filter_gzip(b->a);
	archive_read_support_format_tar(b->a);
	if (archive_read_open_memory(b->a, data, len) != ARCHIVE_OK) {
		lua_pushfstring(L, "tar_unpack: not a tar or tar.gz archive: %s", archive_error_string(b->a));
		return unpack_fail(L, b, GLSB_TAR_CORRUPT);
	}
	for (;;) {
		struct archive_entry *e;
		const char *raw, *why = NULL, *prev, *target = NULL;
		int type = -1;
		const char *points_to = NULL; /* a symlink's target, also for a hardlink to a symlink */
		char *name;
		size_t rlen, nlen;
		int r = archive_read_next_header(b->a, &e);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN) {
			lua_pushfstring(L, "tar_unpack: after %I entries: %s", count, archive_error_string(b->a));
			return unpack_fail(L, b, GLSB_TAR_CORRUPT);
		}
		if (++count > max_entries) {
			lua_pushfstring(L, "tar_unpack: more than max_entries (%I) entries", max_entries);
			return unpack_fail(L, b, GLSB_TAR_TOO_LARGE);
		}
		raw = archive_entry_pathname_utf8(e);
		if (!raw)
			raw = archive_entry_pathname(e);
		if (!raw) {
			lua_pushfstring(L, "tar_unpack: entry %I: name cannot be read", count);
			return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
		}
		rlen = strlen(raw);
		name = scratch(L, b, 0, rlen + 1);
		if (rlen == 0)
			why = "empty name";
		else
			why = normalize(raw, rlen, name, &nlen);
		if (why) {
			lua_pushfstring(L, "tar_unpack: entry '%s': %s", raw, why);
			return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
		}

		if (archive_entry_hardlink(e)) {
			const char *hl = archive_entry_hardlink_utf8(e);
			size_t hlen, clen;
			char *canon;
			if (!hl)
				hl = archive_entry_hardlink(e);
			hlen = strlen(hl);
			canon = scratch(L, b, 1, hlen + 1);
			why = hlen == 0 ? "hardlink target is empty" : normalize(hl, hlen, canon, &clen);
			if (!why && nlen == 0)
				why = "empty name";
			if (!why) {
				lua_getfield(L, U_NAMES, canon);
				prev = lua_tostring(L, -1);
				lua_pop(L, 1);
				if (!prev)
					why = "hardlink target is not an earlier entry";
				else if (strcmp(prev, "dir") == 0)
					why = "hardlink to a directory";
				else if (strcmp(prev, "symlink") == 0) {
					/* The new name is that symlink, now read from another directory. */
					lua_getfield(L, U_LINKS, canon);
					points_to = lua_tostring(L, -1); /* anchored in U_LINKS */
					lua_pop(L, 1);
				}
			}
			if (why) {
				lua_pushfstring(L, "tar_unpack: entry '%s': %s ('%s')", raw, why, hl);
				return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
			}
			type = T_HARDLINK;
			target = canon;
		} else {
			switch (archive_entry_filetype(e)) {
			case AE_IFREG: type = T_FILE; break;
			case AE_IFDIR: type = T_DIR; break;
			case AE_IFLNK: type = T_SYMLINK; break;
			case AE_IFCHR: why = "character device entries are not allowed"; break;
			case AE_IFBLK: why = "block device entries are not allowed"; break;
			case AE_IFIFO: why = "fifo entries are not allowed"; break;
			case AE_IFSOCK: why = "socket entries are not allowed"; break;
			default: why = "entry type not supported"; break;
			}
			if (!why && nlen == 0 && type != T_DIR)
				why = "empty name";
			if (!why && type == T_SYMLINK) {
				target = archive_entry_symlink_utf8(e);
				if (!target)
					target = archive_entry_symlink(e);
				if (!target || !*target)
					why = "symlink target is empty";
				else if (target[0] == '/')
					why = "symlink target is absolute";
				points_to = target;
			}
			if (why) {
				lua_pushfstring(L, "tar_unpack: entry '%s': %s", raw, why);
				return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
			}
			if (nlen == 0)
				continue; /* "./": the root itself */
		}
		/* A name may repeat (tar appends updates) but never where a symlink is involved:
		 * the link check below sees one version of each path. */
		lua_getfield(L, U_NAMES, name);
		prev = lua_tostring(L, -1);
		lua_pop(L, 1);
		if (prev && (strcmp(prev, "symlink") == 0 || points_to)) {
			lua_pushfstring(L, "tar_unpack: entry '%s': name used twice, once by a symlink", raw);
			return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
		}

		lua_createtable(L, 0, 4);
		lua_pushstring(L, name);
		lua_setfield(L, -2, "name");
		lua_pushstring(L, TYPES[type]);
		lua_setfield(L, -2, "type");
		lua_pushinteger(L, archive_entry_perm(e) & 07777);
		lua_setfield(L, -2, "mode");
		if (target) {
			lua_pushstring(L, target);
			lua_setfield(L, -2, "target");
		}
		if (type == T_FILE) {
			enum glsb_code code = read_data(L, b, e, &total, max_bytes, name);
			if (code)
				return unpack_fail(L, b, code);
			lua_setfield(L, -2, "data");
		}
		if (points_to) {
			lua_pushstring(L, name);
			lua_pushstring(L, points_to);
			lua_settable(L, U_LINKS);
		}
		lua_pushstring(L, name);
		lua_pushstring(L, points_to ? "symlink" : TYPES[type]);
		lua_settable(L, U_NAMES);
		lua_rawseti(L, U_RESULT, ++out);
	}
	/* Every symlink (and hardlink to one) is judged against the whole archive, later
	 * entries included; no name is both a link and something else, so U_LINKS is exact. */
	for (i = 1; i <= out; i++) {
		const char *why;
		lua_rawgeti(L, U_RESULT, i);
		lua_getfield(L, -1, "name");
		if (lua_getfield(L, U_LINKS, lua_tostring(L, -1)) != LUA_TSTRING) {
			lua_pop(L, 3);
			continue;
		}
		why = link_escapes(L, b, lua_tostring(L, -2), lua_tostring(L, -1));
		if (why) {
			lua_pushfstring(L, "tar_unpack: entry '%s': symlink to '%s': %s",
					lua_tostring(L, -2), lua_tostring(L, -1), why);
			return unpack_fail(L, b, GLSB_TAR_UNSAFE_ENTRY);
		}
		lua_pop(L, 3);
	}
	box_release(b);
	lua_settop(L, U_RESULT);
	return 1;
}

/*
 * libarchive converts names between the locale's charset and the UTF-8 of pax records, so
 * the same names would give different bytes under LANG=C and LANG=C.UTF-8 (and a pax path
 * written elsewhere would read back differently). Lua strings are bytes, in practice UTF-8:
 * run every call in C.UTF-8 (built into glibc >= 2.35) for this thread only, and restore
 * the caller's locale also when the call raises.
 */
static int in_utf8_locale(lua_State *L, lua_CFunction fn)
{
	locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	locale_t old = utf8 ? uselocale(utf8) : (locale_t)0;
	int status;

	lua_pushcfunction(L, fn);
	lua_insert(L, 1);
	status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
	if (utf8) {
		uselocale(old);
		freelocale(utf8);
	}
	if (status != LUA_OK)
		return lua_error(L);
	return lua_gettop(L);
}

/* Argument checks happen here, outside the pcall, so messages name the function. */
static int l_tar_pack(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	if (!lua_isnoneornil(L, 2))
		luaL_checktype(L, 2, LUA_TTABLE);
	lua_settop(L, 2);
	return in_utf8_locale(L, pack_impl);
}

static int l_tar_unpack(lua_State *L)
{
	luaL_checkstring(L, 1);
	if (!lua_isnoneornil(L, 2))
		luaL_checktype(L, 2, LUA_TTABLE);
	lua_settop(L, 2);
	return in_utf8_locale(L, unpack_impl);
}

void glsb_open_archive(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"tar_pack", l_tar_pack},
		{"tar_unpack", l_tar_unpack},
		{NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
