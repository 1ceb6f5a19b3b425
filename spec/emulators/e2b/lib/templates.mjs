// Template registry and the build system v2 emulation.
//
// A "build" materialises a sandbox file tree: the base is the host system (fromImage is logged,
// not pulled) or another template's tree (fromTemplate); COPY extracts the uploaded tar
// into the tree, RUN executes in the tree (bubblewrap view, see runtime.mjs), ENV/WORKDIR/USER
// set defaults for sandboxes created from it. The start command runs in every new sandbox.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { randomId, uuid } from './util.mjs';
import { rmrf, killTree, liveChildren } from './runtime.mjs';
import { makeVmTree, spawnVm, vmPath as hostPath, copyTree, baseEnv, ensureDirs, chownTree, USERS } from './vm.mjs';

// The code-interpreter template's start and ready commands (e2b-dev/code-interpreter template/template.py)
export const CI_START = 'sudo systemctl start jupyter';
export const CI_READY = 'curl -s -o /dev/null -w "%{http_code}" http://localhost:49999/health | grep -q "200"';

const DEFAULT_TEMPLATES = ['base', 'code-interpreter-v1'];

export class Templates {
  constructor(emu) {
    this.emu = emu;
    this.dir = path.join(emu.stateDir, 'templates');
    fs.mkdirSync(this.dir, { recursive: true });
    this.byId = new Map();
    this.uploads = new Map(); // token -> {templateID, hash}
    this.running = new Set(); // build children
    this.reset();
  }

  reset() {
    for (const c of this.running) killTree(c);
    this.running.clear();
    for (const t of this.byId.values()) for (const b of t.builds) if (b.root) rmrf(b.root);
    rmrf(path.join(this.dir, 'files'));
    this.byId.clear();
    this.uploads.clear();
    fs.mkdirSync(path.join(this.dir, 'files'), { recursive: true });
    for (const name of DEFAULT_TEMPLATES) {
      const t = this.newTemplate(name, true);
      const b = this.newBuild(t, {});
      b.status = 'ready';
      b.finishedAt = Date.now();
      // both run as `user` in /home/user; the code interpreter's start and ready commands start Jupyter
      // and wait for it (code-interpreter template/template.py)
      b.user = 'user';
      b.workdir = '/home/user';
      if (name === 'code-interpreter-v1') {
        b.startCmd = CI_START;
        b.readyCmd = CI_READY;
      }
    }
  }

  shutdown() {
    for (const c of this.running) killTree(c);
    this.running.clear();
  }

  newTemplate(name, isPublic = false) {
    const t = {
      templateID: randomId('', 20),
      names: [name],
      public: isPublic,
      builds: [],
      // tag assignments, oldest first: {tag, buildID, createdAt}. A build's tags are assigned when it is
      // requested, whatever becomes of it (infra template/register_build.go); the tags list shows
      // the latest assignment per tag (db queries/templates/list_template_tags.sql) and a sandbox
      // made from name:tag gets the latest *ready* build assigned that tag
      // (queries/templates/get_template_with_build_by_tag.sql).
      assignments: [],
      files: new Set(), // uploaded files hashes
      createdAt: Date.now(),
      updatedAt: Date.now(),
    };
    this.byId.set(t.templateID, t);
    return t;
  }

  newBuild(t, { cpuCount, memoryMB, tags }) {
    const requested = tags && tags.length ? [...new Set(tags)] : ['default'];
    // A new build supersedes the template's builds not started yet that share one of its tags
    // (register_build.go: InvalidateUnstartedTemplateBuilds).
    for (const old of t.builds) {
      if (old.status !== 'waiting' || !old.requestedTags.some((x) => requested.includes(x))) continue;
      old.status = 'error';
      old.reason = { message: 'The build was canceled because it was superseded by a newer one.' };
      old.finishedAt = Date.now();
    }
    const b = {
      buildID: uuid(),
      templateID: t.templateID,
      status: 'waiting',
      logEntries: [],
      reason: undefined,
      root: null,
      env: {},
      user: 'user',
      workdir: undefined,
      startCmd: undefined,
      readyCmd: undefined,
      interpreter: false, // code-interpreter template (or built on one): kernel started at create
      cpuCount: cpuCount || 2,
      memoryMB: memoryMB || 1024,
      requestedTags: requested,
      // strictly increasing, so "newest first" is well defined even for builds of one millisecond
      createdAt: this.lastCreated = Math.max(Date.now(), (this.lastCreated || 0) + 1),
      updatedAt: Date.now(),
      finishedAt: undefined,
    };
    t.builds.push(b);
    for (const tag of requested) this.assign(t, tag, b.buildID);
    return b;
  }

  assign(t, tag, buildID) {
    t.assignments.push({ tag, buildID, createdAt: Date.now(), seq: this.seq = (this.seq || 0) + 1 });
  }

  // The latest assignment of each tag, whatever its build's status, sorted by tag.
  tagList(t) {
    const latest = new Map();
    for (const a of t.assignments) latest.set(a.tag, a);
    return [...latest.values()].sort((a, b) => (a.tag < b.tag ? -1 : 1));
  }

  // The latest ready build assigned `tag` (or the build whose id `tag` is), or undefined.
  readyBuild(t, tag) {
    for (let i = t.assignments.length - 1; i >= 0; i--) {
      const a = t.assignments[i];
      if (a.tag !== tag && a.buildID !== tag) continue;
      const b = t.builds.find((x) => x.buildID === a.buildID);
      if (b && b.status === 'ready') return b;
    }
    return undefined;
  }

  // name | team/name | name:tag | templateID -> {template, build?, tag}. Trimmed and lower-cased
  // like infra's id.ParseName.
  lookup(ref) {
    if (typeof ref !== 'string' || ref.trim() === '') return null;
    let name = ref.trim().toLowerCase();
    let tag = 'default';
    const colon = name.lastIndexOf(':');
    if (colon > 0) { tag = name.slice(colon + 1); name = name.slice(0, colon); }
    const slash = name.lastIndexOf('/');
    if (slash >= 0) name = name.slice(slash + 1);
    for (const t of this.byId.values()) {
      if (t.templateID === name || t.names.includes(name)) return { template: t, tag };
    }
    return null;
  }

  buildOf(sbx) {
    const t = this.byId.get(sbx.templateID);
    return t ? t.builds.find((b) => b.buildID === sbx.buildID) : undefined;
  }

  // A template usable for create: its tag points at a ready build.
  resolve(ref) {
    const found = this.lookup(ref);
    if (!found) return null;
    const build = this.readyBuild(found.template, found.tag);
    if (!build) return null;
    return { template: found.template, build };
  }

  list() {
    return [...this.byId.values()].map((t) => {
      const last = t.builds[t.builds.length - 1];
      return {
        templateID: t.templateID,
        buildID: last ? last.buildID : undefined,
        names: t.names,
        aliases: t.names,
        public: t.public,
        cpuCount: last ? last.cpuCount : 2,
        memoryMB: last ? last.memoryMB : 512,
        diskSizeMB: 1024,
        envdVersion: '0.6.13',
        buildStatus: last ? last.status : 'waiting',
        buildCount: t.builds.length,
        spawnCount: 0,
        createdAt: new Date(t.createdAt).toISOString(),
        updatedAt: new Date(t.updatedAt).toISOString(),
        lastSpawnedAt: null,
        createdBy: null,
      };
    });
  }

  // POST /sandboxes/{id}/snapshots: a snapshot is a template (infra handlers/snapshot_template_create.go):
  // a name reuses the team's template of that alias (a new build under the name's tag, `default` when
  // none) or makes one; no name, a new unnamed template. Its build is the sandbox's checkpoint: here
  // the file tree (memory cannot be copied: a sandbox made from it starts its start command anew),
  // with the source's env, user, workdir and start/ready commands.
  async snapshot(sbx, { alias, tag = 'default' } = {}) {
    const source = this.buildOf(sbx) || {};
    const found = alias ? this.lookup(alias) : null;
    const t = found && !found.template.public ? found.template : this.newTemplate(alias, false);
    if (!alias) t.names = [];
    const b = this.newBuild(t, { cpuCount: sbx.cpuCount, memoryMB: sbx.memoryMB, tags: [tag] });
    b.root = path.join(this.dir, `build-${b.buildID}`);
    await this.emu.checkpoint(sbx, b.root);
    Object.assign(b, {
      status: 'ready', finishedAt: Date.now(), env: { ...(source.env || {}), ...sbx.envVars }, user: source.user || sbx.templateUser,
      workdir: source.workdir, startCmd: source.startCmd, readyCmd: source.readyCmd,
    });
    b.snapshotOf = sbx.id;
    t.snapshot = true;
    t.updatedAt = Date.now();
    return { template: t, build: b, tag };
  }

  // The snapshot templates, newest build first: [{template, build, tag}] (GET /snapshots; a name's
  // row is its newest build under each tag, list_team_snapshot_templates.sql).
  snapshots() {
    const rows = [];
    for (const t of this.byId.values()) {
      if (!t.snapshot) continue;
      for (const a of this.tagList(t)) {
        const b = t.builds.find((x) => x.buildID === a.buildID);
        if (b && b.snapshotOf) rows.push({ template: t, build: b, tag: a.tag });
      }
    }
    return rows.sort((x, y) => y.build.createdAt - x.build.createdAt);
  }

  remove(t) {
    for (const b of t.builds) if (b.root) rmrf(b.root);
    this.byId.delete(t.templateID);
  }

  filePath(templateID, hash) {
    return path.join(this.dir, 'files', `${templateID}-${hash}.tar`);
  }

  log(b, message, level = 'info', step) {
    const e = { timestamp: new Date().toISOString(), level, message };
    if (step !== undefined) e.step = String(step);
    b.logEntries.push(e);
    b.updatedAt = Date.now();
  }

  fail(b, message, step) {
    this.log(b, message, 'error', step);
    b.status = 'error';
    b.reason = { message, step: step === undefined ? undefined : String(step), logEntries: b.logEntries.slice(-5) };
    b.finishedAt = Date.now();
    if (b.root) { rmrf(b.root); b.root = null; }
  }

  // Run the build JSON (TemplateBuildStartV2) in the background.
  start(t, b, spec) {
    b.status = 'building';
    b.spec = spec;
    this.run(t, b, spec).catch((e) => {
      if (b.status === 'building') this.fail(b, `internal emulator error: ${e.message}`);
    });
  }

  async run(t, b, spec) {
    const steps = Array.isArray(spec.steps) ? spec.steps : [];
    b.root = path.join(this.dir, `build-${b.buildID}`);
    this.log(b, `Building template ${t.templateID}/${b.buildID}`);
    if (spec.fromTemplate) {
      const base = this.resolve(spec.fromTemplate);
      if (!base) return this.fail(b, `base template '${spec.fromTemplate}' not found`, 'base');
      fs.mkdirSync(b.root, { recursive: true });
      if (base.build.root) copyTree(base.build.root, b.root);
      Object.assign(b.env, base.build.env);
      b.user = base.build.user;
      b.workdir = base.build.workdir;
      // the start and ready commands are inherited unless this build sets its own (finalize Layer)
      b.startCmd = base.build.startCmd;
      b.readyCmd = base.build.readyCmd;
      this.log(b, `[base] FROM template ${spec.fromTemplate}`, 'info', 'base');
    } else {
      const image = spec.fromImage || 'e2bdev/base';
      this.log(b, `[base] FROM ${image} (emulated by the host system)`, 'info', 'base');
      // an image's build starts as root with no workdir (base/builder.go defaultUser)
      b.user = 'root';
      b.workdir = undefined;
    }
    makeVmTree(b.root);
    let user = b.user || 'user';
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i] || {};
      const n = i + 1;
      const args = Array.isArray(step.args) ? step.args : [];
      this.log(b, `[builder ${n}/${steps.length}] ${step.type} ${args.join(' ')}`.trim(), 'info', n);
      try {
        switch (step.type) {
          case 'RUN': {
            // envd runs the step as its user, named in Basic auth: one the image lacks is refused before
            // anything runs; a non-zero exit is the end event's status (orchestrator template/build/
            // commands/run.go, sandboxtools/command.go; envd permissions/authenticate.go)
            const runUser = args[1] || user;
            const cmd = args[0] || '';
            if (!USERS[runUser]) {
              return this.fail(b, `failed to run command '${cmd}': command failed: unauthenticated: invalid username: '${runUser}'`, n);
            }
            const r = await this.runCmd(b, cmd, runUser, n);
            if (r !== 0) return this.fail(b, `failed to run command '${cmd}': exit status ${r}`, n);
            break;
          }
          case 'COPY': {
            const err = await this.copy(t, b, step, args, user);
            if (err) return this.fail(b, `step ${n} failed: ${err}`, n);
            break;
          }
          case 'ENV':
            for (let k = 0; k + 1 < args.length; k += 2) b.env[args[k]] = args[k + 1];
            break;
          case 'WORKDIR': {
            const w = path.posix.resolve(b.workdir || (USERS[user] || USERS.user).home, args[0] || '/');
            try { ensureDirs(b.root, w, user); } catch { /* a host directory: it exists */ }
            b.workdir = w;
            break;
          }
          case 'USER':
            user = args[0] || 'user';
            b.user = user;
            break;
          default:
            return this.fail(b, `step ${n}: unsupported instruction type '${step.type}'`, n);
        }
      } catch (e) {
        return this.fail(b, `step ${n} failed: ${e.message}`, n);
      }
    }
    if (spec.startCmd || spec.readyCmd) {
      // a start or ready command of this build replaces both of the base's (finalize/builder.go Layer)
      b.startCmd = spec.startCmd || undefined;
      b.readyCmd = spec.readyCmd || undefined;
    }
    if (b.startCmd) this.log(b, `[finalize] start command: ${b.startCmd}`, 'info', 'finalize');
    if (b.readyCmd) this.log(b, `[finalize] ready command: ${b.readyCmd} (awaited when a sandbox is created)`, 'info', 'finalize');
    this.log(b, 'Build finished', 'info', 'finalize');
    b.status = 'ready';
    b.finishedAt = Date.now();
    t.updatedAt = Date.now();
  }

  runCmd(b, cmd, user, n) {
    return new Promise((resolve) => {
      const env = { ...baseEnv(user), ...b.env };
      const home = (USERS[user] || USERS.user).home;
      const child = spawnVm(b.root, ['/bin/bash', '-c', cmd], { env, user, cwd: b.workdir || home, stateDir: this.emu.stateDir });
      this.running.add(child);
      let pending = '';
      const onData = (level) => (d) => {
        pending += d.toString('utf8');
        let i;
        while ((i = pending.indexOf('\n')) >= 0) {
          this.log(b, pending.slice(0, i), level, n);
          pending = pending.slice(i + 1);
        }
      };
      child.stdout.on('data', onData('info'));
      child.stderr.on('data', onData('info'));
      child.on('error', () => { this.running.delete(child); resolve(127); });
      child.on('close', (code, sig) => {
        this.running.delete(child);
        if (pending) this.log(b, pending, 'info', n);
        resolve(sig ? 128 : code);
      });
    });
  }

  // A relative destination is against the workdir, or with none the current user's home: /root for a
  // build from an image, which starts as root with no workdir (commands/copy_script.sh: `getent passwd
  // "$user"`; phases/base/builder.go defaultUser).
  async copy(t, b, step, args, user) {
    const [src, dest, , mode] = args;
    if (!src || !dest) return 'COPY needs a source and a destination';
    const file = this.filePath(t.templateID, step.filesHash);
    if (!step.filesHash || !fs.existsSync(file)) return `files for '${src}' (hash ${step.filesHash}) were not uploaded`;
    const ctx = fs.mkdtempSync(path.join(this.dir, 'ctx-'));
    try {
      const code = await new Promise((resolve) => {
        const c = spawn('tar', ['-xf', file, '-C', ctx, '--no-same-owner'], { stdio: 'ignore' });
        liveChildren.add(c);
        c.on('close', (rc) => { liveChildren.delete(c); resolve(rc); });
        c.on('error', () => { liveChildren.delete(c); resolve(-1); });
      });
      if (code !== 0) return `could not extract the uploaded archive for '${src}'`;
      const destAbs = path.posix.resolve(b.workdir || (USERS[user] || USERS.user).home, dest);
      const target = hostPath(b.root, destAbs);
      if (!target.writable) return `destination '${destAbs}' is outside the emulator's writable tree`;
      // The source is the part before the first glob (doublestar.SplitPattern in commands/copy.go): a
      // glob copies that folder (the SDK's archive holds only what matched) into the destination
      const segs = src.replace(/^\.\/+/, '').replace(/\/+$/, '').split('/');
      const firstGlob = segs.findIndex((x) => /[*?[{]/.test(x));
      const entry = path.join(ctx, ...(firstGlob >= 0 ? segs.slice(0, firstGlob) : segs));
      let st;
      try { st = fs.lstatSync(entry); } catch { return `source path does not exist: ${src}`; }
      const owner = (args[2] || b.user || 'root').split(':')[0];
      if (st.isDirectory()) {
        // merged into the target directory (copy_script.sh: tar into "$targetPath")
        fs.mkdirSync(target.host, { recursive: true });
        for (const n of fs.readdirSync(entry)) {
          const to = path.join(target.host, n);
          fs.cpSync(path.join(entry, n), to, { recursive: true, verbatimSymlinks: true, force: true });
          if (mode) fs.chmodSync(to, parseInt(mode, 8));
          chownTree(to, owner);
        }
      } else {
        // a file or link: to the exact path, or into it with a trailing slash; mv into an existing directory
        if (dest.endsWith('/')) fs.mkdirSync(target.host, { recursive: true });
        else fs.mkdirSync(path.dirname(target.host), { recursive: true });
        const to = dest.endsWith('/') || isDir(target.host) ? path.join(target.host, path.basename(entry)) : target.host;
        fs.cpSync(entry, to, { verbatimSymlinks: true, force: true });
        if (mode && !st.isSymbolicLink()) fs.chmodSync(to, parseInt(mode, 8));
        // owned by the step's owner, else the build's user (orchestrator template/build/commands/copy.go)
        chownTree(to, owner);
      }
      return null;
    } finally {
      rmrf(ctx);
    }
  }
}

function isDir(p) {
  try { return fs.statSync(p).isDirectory(); } catch { return false; }
}
