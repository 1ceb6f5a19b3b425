// What the javascript kernel (kernel.js) runs: TypeScript made JavaScript, and `import` statements
// require() calls, by sucrase (pinned in spec/package.json) in the emulator's process, so the kernel
// in the sandbox needs nothing but node. Shared by the E2B and OpenSandbox emulators.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const KERNEL_JS = fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), 'kernel.js'), 'utf8');
export const NODE = fs.existsSync('/usr/bin/node') ? '/usr/bin/node' : process.execPath;

let sucrase = null;
export async function toScript(code, language) {
  const hasImport = /^\s*(import\s|export\s)/m.test(code);
  if (language !== 'typescript' && !hasImport) return code;
  if (!sucrase) sucrase = await import('sucrase');
  const transforms = language === 'typescript' ? ['typescript'] : [];
  if (hasImport) transforms.push('imports');
  return sucrase.transform(code, { transforms, disableESTransforms: true }).code;
}
