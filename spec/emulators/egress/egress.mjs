// Egress rules of the emulators' sandboxes (tests only): egress.c, preloaded into every process of a
// sandbox that has rules, checks where it connects (see that file and spec/emulators/README.md
// "Egress"); and a loopback address of each sandbox's own (allocLoopback), which the same library gives
// the sandbox's servers and its connects to 127.0.0.1. It is compiled once per emulator, into its state directory, with the machine's C compiler.
import fs from 'node:fs';
import os from 'node:os';
import crypto from 'node:crypto';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SOURCE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'egress.c');
// where the library's directory is bound in a sandbox (read-only; its own permissions, 0755, cover
// the mount point bubblewrap makes)
export const SANDBOX_DIR = '/.glsb-egress';
export const SANDBOX_PATH = `${SANDBOX_DIR}/egress.so`;

const built = new Map(); // stateDir -> {lib} | {error}

// library(stateDir) -> {lib: host path, dir} | {error: why it cannot be enforced}. Built once per
// emulator (every sandbox's processes preload it, for their own loopback), in its state directory,
// from a copy of the last build of the same source when one is there: os.tmpdir()/glsb-emu-egress-<uid>/
// <sha256 of the source>.so, a directory of ours nobody else may write to (else not used).
export function library(stateDir) {
  if (built.has(stateDir)) return built.get(stateDir);
  const dir = path.join(stateDir, 'glsb-egress');
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755);
  const lib = path.join(dir, 'egress.so');
  const cached = cachedBuild();
  if (cached && fs.existsSync(cached)) {
    try {
      fs.copyFileSync(cached, lib);
      const out = { lib, dir };
      built.set(stateDir, out);
      return out;
    } catch { /* build it */ }
  }
  let out = { error: 'no C compiler (cc) to build the egress library' };
  for (const cc of ['cc', 'gcc', 'clang']) {
    const r = spawnSync(cc, ['-O2', '-shared', '-fPIC', '-Wall', '-Wextra', '-o', lib, SOURCE, '-ldl'], { encoding: 'utf8' });
    if (r.error && r.error.code === 'ENOENT') continue;
    out = r.status === 0 ? { lib, dir } : { error: `${cc} failed: ${(r.stderr || '').trim().slice(0, 500)}` };
    break;
  }
  if (out.lib && cached) {
    try {
      const tmp = `${cached}.${process.pid}`;
      fs.copyFileSync(lib, tmp);
      fs.renameSync(tmp, cached);
    } catch { /* no cache then */ }
  }
  built.set(stateDir, out);
  return out;
}

// The cache's path for this source, or null when its directory is not ours alone.
function cachedBuild() {
  try {
    const uid = process.getuid ? process.getuid() : 0;
    const dir = path.join(os.tmpdir(), `glsb-emu-egress-${uid}`);
    try { fs.mkdirSync(dir, { mode: 0o755 }); } catch (e) { if (e.code !== 'EEXIST') return null; }
    const st = fs.lstatSync(dir);
    if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o022) !== 0) return null;
    const hash = crypto.createHash('sha256').update(fs.readFileSync(SOURCE)).digest('hex');
    return path.join(dir, `${hash}.so`);
  } catch {
    return null;
  }
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(\/(\d{1,2}))?$/;
export function isCidr(s) {
  const m = IPV4.exec(String(s).trim());
  return !!m && m.slice(1, 5).every((x) => Number(x) <= 255) && (m[6] === undefined || Number(m[6]) <= 32);
}

// rulesEnv({allow, deny, names, denyNames, defaultDeny}) -> the GLSB_EMU_EGRESS value, or null when
// nothing is restricted
export function rulesEnv({ allow = [], deny = [], names = [], denyNames = [], defaultDeny = false }) {
  if (!deny.length && !defaultDeny && !denyNames.length) return null;
  const parts = [];
  if (allow.length) parts.push(`allow=${allow.join(',')}`);
  if (deny.length) parts.push(`deny=${deny.join(',')}`);
  if (names.length) parts.push(`names=${names.join(',')}`);
  if (denyNames.length) parts.push(`denynames=${denyNames.join(',')}`);
  if (defaultDeny) parts.push('default=deny');
  return parts.join(';');
}

// processEnv(rules, stateDir, bwrap[, loopback]) -> {env: the variables the sandbox's process gets, bind:
// [host dir, sandbox dir] | null, error?} (rules and loopback null: nothing). loopback: the sandbox's own
// loopback address (egress.c: its servers bind there, its connects to 127.0.0.1 go there when served).
// Under bubblewrap the variables are set inside it (--setenv), so bubblewrap itself, outside, is not
// asked to preload a path it cannot see.
export function processEnv(rules, stateDir, bwrap, loopback = null) {
  if (!rules && !loopback) return { env: {}, bind: null };
  const b = library(stateDir);
  if (b.error) return { env: {}, bind: null, error: b.error };
  const env = { LD_PRELOAD: bwrap ? SANDBOX_PATH : b.lib };
  if (rules) env.GLSB_EMU_EGRESS = rules;
  if (loopback) env.GLSB_EMU_LOOPBACK = loopback;
  return { env, bind: bwrap ? [b.dir, SANDBOX_DIR] : null };
}

// A loopback address of its own for each sandbox of this emulator: 127.<64 + (pid >> 8) % 64>.<pid %
// 256>.<n>, n = 1..254 (the emulator's pid in the middle, so two emulators on one machine do not hand out
// the same one but when their pids agree in their low 14 bits). Outside 127.0.0.0/16, where the specs'
// egress targets live. release(addr) gives one back.
const inUse = new Set();
export function allocLoopback() {
  const pid = process.pid;
  const prefix = `127.${64 + ((pid >> 8) % 64)}.${pid % 256}`;
  for (let n = 1; n <= 254; n++) {
    const a = `${prefix}.${n}`;
    if (!inUse.has(a)) { inUse.add(a); return a; }
  }
  return null; // 254 sandboxes at once: the next one shares the machine's loopback, as before
}
export function releaseLoopback(addr) { inUse.delete(addr); }

export function sourceExists() {
  return fs.existsSync(SOURCE);
}
