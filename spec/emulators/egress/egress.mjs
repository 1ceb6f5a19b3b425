// Egress rules of the emulators' sandboxes (tests only): egress.c, preloaded into every process of a
// sandbox that has rules, checks where it connects (see that file and spec/emulators/README.md
// "Egress"). It is compiled once per emulator, into its state directory, with the machine's C compiler.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SOURCE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'egress.c');
// where the library's directory is bound in a sandbox (read-only; its own permissions, 0755, cover
// the mount point bubblewrap makes)
export const SANDBOX_DIR = '/.glsb-egress';
export const SANDBOX_PATH = `${SANDBOX_DIR}/egress.so`;

const built = new Map(); // stateDir -> {lib} | {error}

// library(stateDir) -> {lib: host path} | {error: why it cannot be enforced}
export function library(stateDir) {
  if (built.has(stateDir)) return built.get(stateDir);
  const dir = path.join(stateDir, 'glsb-egress');
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  fs.chmodSync(dir, 0o755);
  const lib = path.join(dir, 'egress.so');
  let out = { error: 'no C compiler (cc) to build the egress library' };
  for (const cc of ['cc', 'gcc', 'clang']) {
    const r = spawnSync(cc, ['-O2', '-shared', '-fPIC', '-Wall', '-Wextra', '-o', lib, SOURCE, '-ldl'], { encoding: 'utf8' });
    if (r.error && r.error.code === 'ENOENT') continue;
    out = r.status === 0 ? { lib, dir } : { error: `${cc} failed: ${(r.stderr || '').trim().slice(0, 500)}` };
    break;
  }
  built.set(stateDir, out);
  return out;
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

// processEnv(rules, stateDir, bwrap) -> {env: the variables the sandbox's process gets, bind: [host dir,
// sandbox dir] | null, error?} (rules null: nothing). Under bubblewrap the variables are set inside it
// (--setenv), so bubblewrap itself, outside, is not asked to preload a path it cannot see.
export function processEnv(rules, stateDir, bwrap) {
  if (!rules) return { env: {}, bind: null };
  const b = library(stateDir);
  if (b.error) return { env: {}, bind: null, error: b.error };
  return { env: { LD_PRELOAD: bwrap ? SANDBOX_PATH : b.lib, GLSB_EMU_EGRESS: rules }, bind: bwrap ? [b.dir, SANDBOX_DIR] : null };
}

export function sourceExists() {
  return fs.existsSync(SOURCE);
}
