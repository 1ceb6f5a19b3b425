// execd file system API (controller/filesystem*.go; docs/protocols/opensandbox.md §2.5).
// Paths may be absolute or relative (to the WORKDIR); ~ and $VAR are expanded. Writable paths live in
// the sandbox tree; other absolute paths are the host's, read-only (writes there fail like EROFS).
import fs from 'node:fs';
import path from 'node:path';
import { readBody, sendGoJson, send } from './util.mjs';
import { resolvePath, sandboxPathOf, baseEnv } from './runtime.mjs';
import { expandPath } from './commands.mjs';

function err(res, status, code, message) {
  sendGoJson(res, status, { code, message });
}

// handleFileError: a missing file is 404 FILE_NOT_FOUND, anything else 500 RUNTIME_ERROR.
function fileError(res, e) {
  if (e && e.code === 'ENOENT') return err(res, 404, 'FILE_NOT_FOUND', `file not found. ${e.message}`);
  return err(res, 500, 'RUNTIME_ERROR', `error accessing file: ${e && e.message}`);
}

function resolve(sbx, p) {
  return resolvePath(sbx.root, expandPath(p, baseEnv(sbx.env)));
}

// A write outside the sandbox tree fails as a read-only file system would.
function writable(rp) {
  if (rp.writable) return;
  const e = new Error(`open ${rp.path}: read-only file system`);
  e.code = 'EROFS';
  throw e;
}

// The image's users and groups (the sandbox sees the host's /etc/passwd and /etc/group): name <-> id,
// as Go's os/user reads them.
function idTable(file) {
  const byName = new Map();
  const byId = new Map();
  let lines = [];
  try { lines = fs.readFileSync(file, 'utf8').split('\n'); } catch { lines = []; }
  for (const l of lines) {
    const f = l.split(':');
    if (f.length < 3 || !/^\d+$/.test(f[2])) continue;
    if (!byName.has(f[0])) byName.set(f[0], Number(f[2]));
    if (!byId.has(Number(f[2]))) byId.set(Number(f[2]), f[0]);
  }
  return { byName, byId };
}
let ids = null;
function users() {
  if (!ids) ids = { user: idTable('/etc/passwd'), group: idTable('/etc/group') };
  return ids;
}

// execd's SetFileOwnership (components/execd/pkg/web/controller/utils.go): owner and group looked up by
// name, an unknown one skipped (a warning in execd's log); neither known: execd's own uid and gid.
// Called after every chmod of an upload, permissions change and mkdir (ChmodFile).
function setOwnership(host, owner, group) {
  const u = owner ? users().user.byName.get(owner) : undefined;
  const g = group ? users().group.byName.get(group) : undefined;
  if (u === undefined && g === undefined) {
    fs.chownSync(host, process.getuid(), process.getgid());
    return;
  }
  fs.chownSync(host, u === undefined ? -1 : u, g === undefined ? -1 : g);
}

// FileInfo: mode is an integer whose decimal digits are the octal permission bits (0644 -> 644);
// owner and group are names where /etc/passwd and /etc/group have them (buildFileInfo).
function fileInfo(sbx, host, st) {
  const type = st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
  return {
    path: sandboxPathOf(sbx.root, host),
    type,
    size: st.size,
    modified_at: st.mtime.toISOString(),
    created_at: (st.birthtimeMs > 0 ? st.birthtime : st.ctime).toISOString(),
    owner: users().user.byId.get(st.uid) || String(st.uid),
    group: users().group.byId.get(st.gid) || String(st.gid),
    mode: Number((st.mode & 0o7777).toString(8)),
  };
}

function octalMode(mode) {
  // 755 (decimal digits) -> 0o755; 0 means "leave unchanged".
  const n = Number(mode);
  if (!Number.isInteger(n) || n <= 0) return null;
  return parseInt(String(n), 8);
}

function boundaryOf(contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType || '');
  return m ? (m[1] || m[2]) : null;
}

// multipart/form-data -> [{name, filename, data}]. Go keeps parts with a filename in form.File.
function parseMultipart(buf, boundary) {
  const delim = Buffer.from('--' + boundary);
  const parts = [];
  let pos = buf.indexOf(delim);
  if (pos < 0) throw new Error('no multipart boundary');
  for (;;) {
    pos += delim.length;
    if (buf[pos] === 0x2d && buf[pos + 1] === 0x2d) break;
    if (buf[pos] === 0x0d && buf[pos + 1] === 0x0a) pos += 2;
    const headEnd = buf.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) throw new Error('malformed multipart part');
    const head = buf.subarray(pos, headEnd).toString('utf8');
    const next = buf.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) throw new Error('multipart: NextPart: EOF');
    const cd = /content-disposition:([^\r\n]*)/i.exec(head);
    const name = cd && /\bname="([^"]*)"/i.exec(cd[1]);
    const filename = cd && /\bfilename="([^"]*)"/i.exec(cd[1]);
    parts.push({ name: name ? name[1] : undefined, filename: filename ? filename[1] : undefined, data: buf.subarray(headEnd + 4, next) });
    pos = next + 2;
  }
  return parts;
}

async function upload(sbx, req, res) {
  const buf = await readBody(req);
  const boundary = boundaryOf(req.headers['content-type']);
  let parts;
  try {
    if (!boundary) throw new Error('no boundary');
    parts = parseMultipart(buf, boundary);
  } catch {
    return err(res, 400, 'INVALID_FILE', 'multipart form is empty');
  }
  const metas = parts.filter((p) => p.name === 'metadata' && p.filename !== undefined);
  const files = parts.filter((p) => p.name === 'file' && p.filename !== undefined);
  if (metas.length === 0) return err(res, 400, 'INVALID_FILE_METADATA', 'metadata file is missing');
  if (files.length === 0) return err(res, 400, 'INVALID_FILE_CONTENT', 'file is missing');
  if (metas.length !== files.length) return err(res, 400, 'INVALID_FILE', `metadata and file count mismatch: ${metas.length} vs ${files.length}`);
  for (let i = 0; i < metas.length; i++) {
    let meta;
    try { meta = JSON.parse(metas[i].data.toString('utf8')); } catch (e) {
      return err(res, 400, 'INVALID_FILE_METADATA', `invalid metadata format. ${e.message}`);
    }
    if (!meta || typeof meta.path !== 'string' || meta.path === '') return err(res, 400, 'INVALID_FILE_METADATA', 'metadata path is empty');
    const rp = resolve(sbx, meta.path);
    const dir = path.dirname(rp.host);
    try {
      writable(rp);
      fs.mkdirSync(dir, { recursive: true, mode: 0o777 });
    } catch (e) {
      return err(res, 500, 'RUNTIME_ERROR', `error creating target directory ${path.posix.dirname(rp.path)}. ${e.message}`);
    }
    try {
      // os.OpenFile(O_WRONLY|O_CREATE|O_TRUNC, 0777): a new file is 0755 under the usual umask; then fsync.
      const fd = fs.openSync(rp.host, 'w', 0o777);
      try {
        fs.writeSync(fd, files[i].data);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      const mode = octalMode(meta.mode);
      if (mode !== null) fs.chmodSync(rp.host, mode);
      setOwnership(rp.host, meta.owner, meta.group);
    } catch (e) {
      return err(res, 500, 'RUNTIME_ERROR', `error opening destination file ${rp.path}. ${e.message}`);
    }
  }
  return send(res, 200);
}

// Range: bytes=a-b | a- | -n (the first range only), as Go's http ParseRange.
function parseRange(h, size) {
  const m = /^bytes=(\d*)-(\d*)$/.exec(String(h).split(',')[0].trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  let start;
  let end;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return null;
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (start >= size || end < start) return null;
  }
  return { start, end };
}

function contentDisposition(name) {
  if (!/[^\x00-\x7f]/.test(name)) return `attachment; filename="${name}"`;
  const enc = encodeURIComponent(name);
  return `attachment; filename="${enc}"; filename*=UTF-8''${enc}`;
}

function download(sbx, req, res, q) {
  const p = q.get('path');
  if (!p) return err(res, 400, 'MISSING_QUERY', "missing query parameter 'path'");
  const rawOffset = q.get('offset') || '';
  const rawLimit = q.get('limit') || '';
  const range = req.headers.range;
  if ((rawOffset || rawLimit) && range) {
    return err(res, 400, 'INVALID_REQUEST_BODY', 'line-based reading (offset/limit) and byte range (Range header) are mutually exclusive');
  }
  const rp = resolve(sbx, p);
  let data;
  try {
    const st = fs.statSync(rp.host);
    if (st.isDirectory()) return err(res, 500, 'RUNTIME_ERROR', `error reading file: read ${rp.path}: is a directory`);
    data = fs.readFileSync(rp.host);
  } catch (e) {
    return fileError(res, e);
  }
  if (rawOffset || rawLimit) {
    const offset = rawOffset ? Number(rawOffset) : 1;
    const limit = rawLimit ? Number(rawLimit) : -1;
    if (!Number.isInteger(offset) || offset < 1) return err(res, 400, 'INVALID_REQUEST_BODY', `invalid query parameter 'offset': ${rawOffset}`);
    if (rawLimit && (!Number.isInteger(limit) || limit < 1)) return err(res, 400, 'INVALID_REQUEST_BODY', `invalid query parameter 'limit': ${rawLimit}`);
    const lines = data.toString('utf8').split('\n');
    if (lines.length && lines[lines.length - 1] === '') lines.pop();
    const picked = lines.slice(offset - 1, limit > 0 ? offset - 1 + limit : undefined).map((l) => l.replace(/\r+$/, ''));
    return send(res, 200, picked.join('\n'), { 'Content-Type': 'text/plain; charset=utf-8' });
  }
  const headers = { 'Content-Type': 'application/octet-stream', 'Content-Disposition': contentDisposition(path.basename(rp.path)),
    'Accept-Ranges': 'bytes', 'Last-Modified': new Date().toUTCString() };
  if (range) {
    const r = parseRange(range, data.length);
    if (!r) return err(res, 416, 'UNKNOWN', '');
    return send(res, 206, data.subarray(r.start, r.end + 1), { ...headers, 'Content-Range': `bytes ${r.start}-${r.end}/${data.length}` });
  }
  return send(res, 200, data, headers);
}

function info(sbx, res, q) {
  const out = {};
  for (const p of q.getAll('path')) {
    const rp = resolve(sbx, p);
    try {
      out[p] = fileInfo(sbx, rp.host, fs.statSync(rp.host));
    } catch (e) {
      return fileError(res, e);
    }
  }
  return sendGoJson(res, 200, out);
}

function removeFiles(sbx, res, q) {
  for (const p of q.getAll('path')) {
    const rp = resolve(sbx, p);
    try {
      writable(rp);
      fs.unlinkSync(rp.host);
    } catch (e) {
      if (e.code === 'ENOENT') continue; // missing files are ignored
      return err(res, 500, 'RUNTIME_ERROR', `error removing file ${p}. ${e.code === 'EISDIR' || e.code === 'EPERM' ? `remove ${rp.path}: is a directory` : e.message}`);
    }
  }
  return send(res, 200);
}

async function jsonBody(req, res) {
  try {
    return JSON.parse((await readBody(req)).toString('utf8'));
  } catch (e) {
    err(res, 400, 'INVALID_REQUEST_BODY', `error parsing request, MAYBE invalid body format. ${e.message}`);
    return undefined;
  }
}

async function move(sbx, req, res) {
  const body = await jsonBody(req, res);
  if (body === undefined) return;
  if (!Array.isArray(body)) return err(res, 400, 'INVALID_REQUEST_BODY', 'error parsing request, MAYBE invalid body format. json: cannot unmarshal object into Go value of type []model.RenameFileItem');
  for (const item of body) {
    const src = resolve(sbx, String(item.src || ''));
    const dest = resolve(sbx, String(item.dest || ''));
    try {
      writable(src);
      writable(dest);
      fs.statSync(src.host);
      fs.mkdirSync(path.dirname(dest.host), { recursive: true });
      fs.renameSync(src.host, dest.host);
    } catch (e) {
      return fileError(res, e);
    }
  }
  return send(res, 200);
}

async function permissions(sbx, req, res) {
  const body = await jsonBody(req, res);
  if (body === undefined) return;
  for (const [p, perm] of Object.entries(body || {})) {
    const rp = resolve(sbx, p);
    try {
      writable(rp);
      const mode = octalMode(perm && perm.mode);
      if (mode !== null) fs.chmodSync(rp.host, mode);
      else fs.statSync(rp.host);
      setOwnership(rp.host, perm && perm.owner, perm && perm.group);
    } catch (e) {
      return err(res, 500, 'RUNTIME_ERROR', `error changing permissions for ${p}. ${e.message}`);
    }
  }
  return send(res, 200);
}

async function replace(sbx, req, res, q) {
  const body = await jsonBody(req, res);
  if (body === undefined) return;
  const verbose = q.get('verbose') === 'true';
  const results = {};
  for (const [p, item] of Object.entries(body || {})) {
    const rp = resolve(sbx, p);
    let text;
    try {
      text = fs.readFileSync(rp.host, 'utf8');
    } catch (e) {
      return fileError(res, e);
    }
    if (!item || typeof item.old !== 'string' || item.old === '') return err(res, 400, 'INVALID_REQUEST_BODY', 'old content must not be empty');
    const count = text.split(item.old).length - 1;
    try {
      writable(rp);
      fs.writeFileSync(rp.host, text.split(item.old).join(String(item.new ?? '')));
    } catch (e) {
      return fileError(res, e);
    }
    results[p] = { replacedCount: count };
  }
  return verbose ? sendGoJson(res, 200, results) : send(res, 200);
}

// The doublestar glob (util/glob) against a file's base name: ** and * any run, ? one char, [...] a class.
function globRegex(pattern) {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') { while (pattern[i + 1] === '*') i++; re += '.*'; } else if (c === '?') re += '.';
    else if (c === '[') {
      const j = pattern.indexOf(']', i + 1);
      if (j < 0) re += '\\[';
      else { re += '[' + pattern.slice(i + 1, j).replace(/^!/, '^').replace(/\\/g, '\\\\') + ']'; i = j; }
    } else if (c === '{') {
      const j = pattern.indexOf('}', i + 1);
      if (j < 0) re += '\\{';
      else { re += '(' + pattern.slice(i + 1, j).split(',').map((x) => x.replace(/[.+^$()|\\]/g, '\\$&')).join('|') + ')'; i = j; }
    } else re += c.replace(/[.+^$()|\\/]/g, '\\$&');
  }
  return new RegExp('^' + re + '$');
}

function search(sbx, res, q) {
  const p = q.get('path');
  if (!p) return err(res, 400, 'MISSING_QUERY', "missing query parameter 'path'");
  const rp = resolve(sbx, p);
  try { fs.statSync(rp.host); } catch (e) { return fileError(res, e); }
  const re = globRegex(q.get('pattern') || '**');
  const out = [];
  const walk = (dir) => {
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const full = path.join(dir, e.name);
      let st;
      try { st = fs.statSync(full); } catch { continue; }
      if (st.isDirectory()) { if (!e.isSymbolicLink()) walk(full); continue; }
      if (re.test(e.name)) out.push(fileInfo(sbx, full, st));
    }
  };
  walk(rp.host);
  return sendGoJson(res, 200, out);
}

function listDir(sbx, res, q) {
  const p = q.get('path');
  if (!p) return err(res, 400, 'MISSING_QUERY', "missing query parameter 'path'");
  let depth = 1;
  if (q.get('depth')) {
    depth = Number(q.get('depth'));
    if (!Number.isInteger(depth) || depth < 0) return err(res, 400, 'INVALID_REQUEST_BODY', `invalid query parameter 'depth': ${q.get('depth')}`);
  }
  const rp = resolve(sbx, p);
  let st;
  try { st = fs.lstatSync(rp.host); } catch (e) { return fileError(res, e); }
  if (st.isSymbolicLink()) return err(res, 400, 'INVALID_REQUEST_BODY', `path is a symbolic link, refusing to traverse: ${rp.path}`);
  if (!st.isDirectory()) return err(res, 400, 'INVALID_REQUEST_BODY', `path is not a directory: ${rp.path}`);
  const out = [];
  const walk = (dir, d) => {
    const entries = fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      const full = path.join(dir, e.name);
      out.push(fileInfo(sbx, full, fs.lstatSync(full)));
      if (e.isDirectory() && d + 1 < depth) walk(full, d + 1);
    }
  };
  if (depth > 0) walk(rp.host, 0);
  return sendGoJson(res, 200, out);
}

async function makeDirs(sbx, req, res) {
  const body = await jsonBody(req, res);
  if (body === undefined) return;
  for (const [p, perm] of Object.entries(body || {})) {
    const rp = resolve(sbx, p);
    try {
      writable(rp);
      fs.mkdirSync(rp.host, { recursive: true });
      const mode = octalMode(perm && perm.mode);
      if (mode !== null) fs.chmodSync(rp.host, mode);
      setOwnership(rp.host, perm && perm.owner, perm && perm.group);
    } catch (e) {
      return fileError(res, e);
    }
  }
  return send(res, 200);
}

function removeDirs(sbx, res, q) {
  for (const p of q.getAll('path')) {
    const rp = resolve(sbx, p);
    try {
      writable(rp);
      fs.rmSync(rp.host, { recursive: true, force: true });
    } catch (e) {
      return err(res, 500, 'RUNTIME_ERROR', `error removing directory ${p}. ${e.message}`);
    }
  }
  return send(res, 200);
}

export async function handleFiles(sbx, req, res, url) {
  const p = url.pathname;
  const m = req.method;
  const q = url.searchParams;
  if (p === '/files/upload' && m === 'POST') return upload(sbx, req, res);
  if (p === '/files/download' && m === 'GET') return download(sbx, req, res, q);
  if (p === '/files/info' && m === 'GET') return info(sbx, res, q);
  if (p === '/files' && m === 'DELETE') return removeFiles(sbx, res, q);
  if (p === '/files/mv' && m === 'POST') return move(sbx, req, res);
  if (p === '/files/permissions' && m === 'POST') return permissions(sbx, req, res);
  if (p === '/files/replace' && m === 'POST') return replace(sbx, req, res, q);
  if (p === '/files/search' && m === 'GET') return search(sbx, res, q);
  if (p === '/directories/list' && m === 'GET') return listDir(sbx, res, q);
  if (p === '/directories' && m === 'POST') return makeDirs(sbx, req, res);
  if (p === '/directories' && m === 'DELETE') return removeDirs(sbx, res, q);
  return null;
}
