// Emulator state: sandboxes, their lifetimes, and the template registry.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomId, uuid } from './util.mjs';
import { rmrf, killTree, liveChildren, makeStateDir, freezeTree, hasBwrap } from './runtime.mjs';
import { makeVmTree, spawnVm, baseEnv, copyTree, hasIdentities, USERS } from './vm.mjs';
import { Faults } from './faults.mjs';
import { stopXattrHelper } from './xattr.mjs';
import { makeFreezer } from './freezer.mjs';
import { processEnv, rulesEnv, isCidr, library, allocLoopback, releaseLoopback } from '../../egress/egress.mjs';
import { Templates } from './templates.mjs';
import { startDefaultKernel } from './interp.mjs';
import { CI_START, CI_READY } from './templates.mjs';

// (CI_START, CI_READY: templates.mjs) The code-interpreter template starts Jupyter only through its start command and is ready when the
// server answers (e2b-dev/code-interpreter template/template.py: set_start_cmd("sudo systemctl start
// jupyter", wait_for_url("http://localhost:49999/health")); systemd/jupyter.service is not enabled). A
// template built on it with a start or ready command of its own replaces both (infra orchestrator/
// pkg/template/build/phases/finalize/builder.go Layer): no Jupyter then. The emulator stands in for
// these two commands: a start command that contains CI_START starts its kernel (and the rest of the
// command runs with `true` in its place); CI_READY in a ready command is true once it has.


export const ENVD_VERSION = '0.6.13';

export class Sandbox {
  constructor(emu, opts) {
    this.emu = emu;
    this.id = opts.id;
    this.templateID = opts.templateID;
    this.alias = opts.alias;
    this.buildID = opts.buildID;
    this.clientID = randomId('', 8);
    // no token without `secure` on the legacy create: envd then takes every request (envd api/auth.go)
    this.envdAccessToken = opts.secure === false ? null : randomId('', 32);
    this.root = opts.root;
    this.startedAt = Date.now();
    this.endAt = this.startedAt;
    this.state = 'running';
    this.metadata = opts.metadata || {};
    this.envVars = opts.envVars || {};
    this.templateEnv = opts.templateEnv || {};
    this.templateUser = opts.templateUser || 'user'; // envd's default user: the template's USER
    this.templateWorkdir = opts.templateWorkdir;
    this.cpuCount = opts.cpuCount || 2;
    this.memoryMB = opts.memoryMB || 512;
    this.diskSizeMB = 1024;
    this.autoPause = !!opts.autoPause;
    this.autoPauseMemory = opts.autoPauseMemory !== false; // false: an expiry pauses without memory
    this.autoResume = !!opts.autoResume;
    this.allowInternetAccess = opts.allowInternetAccess;
    this.network = opts.network;
    // network.allowPublicTraffic = false: a token guards the sandbox's ports (orchestrator/pkg/proxy)
    this.trafficAccessToken = opts.network && opts.network.allowPublicTraffic === false ? randomId('', 32) : null;
    this.volumeMounts = opts.volumeMounts;
    this.processes = new Map(); // pid -> Proc (envd.mjs)
    this.contexts = new Map(); // id -> Context (interp.mjs)
    this.active = new Set(); // in-flight data-plane responses
    this.timer = null;
    // /proc/sys/kernel/random/boot_id in the sandbox: new at each cold boot, kept across a pause
    this.bootFile = path.join(emu.stateDir, 'sandboxes', `${this.id}.boot_id`);
    this.newBoot();
    // every process of the sandbox is in its freezer cgroup (freezer.mjs), when there is one
    this.freezer = hasBwrap() ? makeFreezer('glsb-e2b-emu-', this.id) : null;
    // A localhost of its own, as the VM has (../../egress/egress.c): its servers bind this address, its
    // connects to 127.0.0.1 reach them, the proxy forwards its ports here, and the emulator answers on it
    // for envd (49983) and, where Jupyter runs, the interpreter (49999). Null without the library (no
    // C compiler): then the sandbox's ports are the machine's.
    this.loopback = library(emu.stateDir).error ? null : allocLoopback();
    this.inside = new Map(); // port -> the emulator's server on this.loopback
  }

  // The emulator's own service on the sandbox's localhost:port (envd's, the interpreter's), so code in
  // the sandbox reaches it as it would in the VM (emu.insideHandler: server.mjs).
  listenInside(port) {
    if (!this.loopback || !this.emu.insideHandler || this.inside.has(port)) return;
    const srv = http.createServer((req, res) => this.emu.insideHandler(this, port, req, res));
    srv.on('error', (e) => this.emu.log(`sandbox ${this.id}: cannot serve ${this.loopback}:${port} inside: ${e.message}`));
    srv.listen(port, this.loopback);
    this.inside.set(port, srv);
  }

  closeInside(port) {
    for (const [p, srv] of [...this.inside]) {
      if (port !== undefined && p !== port) continue;
      srv.close();
      srv.closeAllConnections?.();
      this.inside.delete(p);
    }
  }

  // The sandbox's egress rules (infra api/internal/orchestrator/create_instance.go buildNetworkConfig):
  // allowOut addresses and names, denyOut CIDRs, and allow_internet_access = false denying all, which
  // overrides denyOut. Enforced in every process started from now on (../../egress).
  setEgress({ allowOut = [], denyOut = [], allowInternetAccess } = {}) {
    const allow = allowOut.filter(isCidr);
    const names = allowOut.filter((x) => !isCidr(x));
    const deny = allowInternetAccess === false ? ['0.0.0.0/0'] : denyOut;
    this.egress = rulesEnv({ allow, deny, names });
  }

  // freeze(true|false): the sandbox's processes stopped (or going again) as one
  async freeze(on) {
    if (this.freezer) return this.freezer.freeze(on);
    for (const c of this.children()) freezeTree(c, on);
    return undefined;
  }

  newBoot() {
    fs.writeFileSync(this.bootFile, uuid() + '\n');
  }

  // Every process the sandbox has: commands, kernels, the start command.
  children() {
    const out = [...this.processes.values()].map((p) => p.child);
    for (const c of this.contexts.values()) if (c.child) out.push(c.child);
    if (this.startChild) out.push(this.startChild);
    return out;
  }

  // What envd's /init set (GET /envs answers it): the sandbox's own variables, the template's ENV and
  // the create call's envVars (infra envd api/envs.go, init.go).
  initEnv() {
    return { E2B_SANDBOX: 'true', E2B_SANDBOX_ID: this.id, ...this.templateEnv, ...this.envVars };
  }

  env(user) {
    return { ...baseEnv(user), ...this.initEnv() };
  }

  // A process in this sandbox, as `user` (vm.mjs).
  spawn(argv, { user = this.templateUser, cwd, env, stdio } = {}) {
    const egress = processEnv(this.egress, this.emu.stateDir, hasBwrap(), this.loopback);
    if (egress.error && !this.egressWarned) { this.egressWarned = true; this.emu.log(`sandbox ${this.id}: egress rules not enforced: ${egress.error}`); }
    return spawnVm(this.root, argv, { user, cwd: cwd || this.templateWorkdir || (USERS[user] || USERS.user).home,
      env: env || this.env(user), setenv: egress.env, stdio, stateDir: this.emu.stateDir, bootFile: this.bootFile,
      cgroupProcs: this.freezer?.procs, binds: egress.bind ? [egress.bind] : [] });
  }

  setTimeout(seconds) {
    this.endAt = Date.now() + seconds * 1000;
    this.arm();
  }

  arm() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.state !== 'running') return;
    const ms = Math.max(0, this.endAt - Date.now());
    // setTimeout's limit is ~24.8 days; E2B caps lifetimes at 24 h.
    this.timer = setTimeout(() => this.emu.expire(this), Math.min(ms, 2 ** 31 - 1));
    this.timer.unref?.();
  }

  stopRuntime() {
    for (const p of this.processes.values()) p.kill('SIGKILL', 'sandbox');
    this.processes.clear();
    for (const c of this.contexts.values()) c.close();
    this.contexts.clear();
    if (this.watchers) {
      for (const w of this.watchers.values()) { try { w.watcher.close(); } catch { /* closed */ } }
      this.watchers.clear();
    }
    // The VM is gone: connections to it drop.
    for (const res of this.active) res.socket?.destroy();
    this.active.clear();
  }

  detail() {
    return {
      sandboxID: this.id,
      templateID: this.templateID,
      alias: this.alias,
      clientID: this.clientID,
      envdVersion: ENVD_VERSION,
      envdAccessToken: this.envdAccessToken,
      domain: null,
      cpuCount: this.cpuCount,
      memoryMB: this.memoryMB,
      diskSizeMB: this.diskSizeMB,
      startedAt: new Date(this.startedAt).toISOString(),
      endAt: new Date(this.endAt).toISOString(),
      state: this.state,
      metadata: this.metadata,
      allowInternetAccess: this.allowInternetAccess,
      network: this.network,
      lifecycle: { onTimeout: this.autoPause ? 'pause' : 'kill', autoResume: this.autoResume },
      volumeMounts: this.volumeMounts,
    };
  }

  listed() {
    return {
      sandboxID: this.id,
      templateID: this.templateID,
      alias: this.alias,
      clientID: this.clientID,
      envdVersion: ENVD_VERSION,
      cpuCount: this.cpuCount,
      memoryMB: this.memoryMB,
      diskSizeMB: this.diskSizeMB,
      startedAt: new Date(this.startedAt).toISOString(),
      endAt: new Date(this.endAt).toISOString(),
      state: this.state,
      metadata: this.metadata,
      volumeMounts: this.volumeMounts,
    };
  }

  created() {
    return {
      sandboxID: this.id,
      templateID: this.templateID,
      alias: this.alias,
      clientID: this.clientID,
      envdVersion: ENVD_VERSION,
      envdAccessToken: this.envdAccessToken,
      trafficAccessToken: this.trafficAccessToken,
      domain: null,
    };
  }
}

export class Emulator {
  constructor({ keys, domain = 'e2b.local', log = () => {}, maxSandboxes = 0, stateDir, selfHosted = false, maxLifetimeHours = 24 }) {
    this.keys = new Set(keys);
    this.maxSandboxes = maxSandboxes; // 0 = unlimited
    this.selfHosted = selfHosted; // the public infra's API: no v2 create/connect (control.mjs)
    this.maxLifetimeHours = maxLifetimeHours; // the plan's cap (1 Hobby, 24 Pro)
    this.domain = domain;
    this.log = log;
    // removed on every exit path, and by the next emulator if this one is SIGKILLed (runtime.mjs)
    this.stateDir = makeStateDir('glsb-e2b-emu-', stateDir);
    fs.mkdirSync(path.join(this.stateDir, 'sandboxes'));
    this.sandboxes = new Map();
    this.faults = new Faults();
    this.templates = new Templates(this);
    this.baseUrl = null; // set once listening
    this.hostsSeen = new Map(); // Host of data-plane requests -> count (/_emulator/state dataPlaneHosts)
    this.closed = false;
  }

  createSandbox({ resolved, timeoutS, metadata, envVars, autoPause, autoPauseMemory, autoResume, allowInternetAccess, network, volumeMounts, secure = true }) {
    const id = randomId('i', 19);
    const root = path.join(this.stateDir, 'sandboxes', id);
    const { template, build } = resolved;
    fs.mkdirSync(root, { recursive: true });
    if (build.root && fs.existsSync(build.root)) copyTree(build.root, root);
    makeVmTree(root);
    const sbx = new Sandbox(this, {
      id,
      templateID: template.templateID,
      alias: template.names[0],
      buildID: build.buildID,
      root,
      metadata,
      envVars,
      templateEnv: build.env,
      templateUser: build.user,
      templateWorkdir: build.workdir,
      cpuCount: build.cpuCount,
      memoryMB: build.memoryMB,
      autoPause,
      autoPauseMemory,
      autoResume,
      allowInternetAccess,
      network,
      volumeMounts,
      secure,
    });
    sbx.setEgress({ allowOut: network?.allowOut || [], denyOut: network?.denyOut || [], allowInternetAccess });
    this.sandboxes.set(id, sbx);
    sbx.listenInside(49983);
    sbx.setTimeout(timeoutS);
    if (build.startCmd) this.startStartCmd(sbx, build);
    this.log(`sandbox ${id} created from ${template.templateID}/${build.buildID} (timeout ${timeoutS}s)`);
    return sbx;
  }

  // With a ready command, creation returns once it succeeds (real E2B snapshots the template
  // after the ready check, so a new sandbox is already "ready"). Gives up after 60 s.
  async waitReady(sbx, build) {
    if (!build.readyCmd) return;
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline && this.sandboxes.has(sbx.id)) {
      const cmd = build.readyCmd.split(CI_READY).join(sbx.jupyter ? 'true' : 'false');
      if (cmd === 'true') return; // the code interpreter's own check: its kernel is up already
      const code = await new Promise((resolve) => {
        const c = sbx.spawn(['/bin/bash', '-c', cmd], { user: build.user || 'user', stdio: ['ignore', 'ignore', 'ignore'] });
        c.on('close', (rc) => resolve(rc));
        c.on('error', () => resolve(-1));
      });
      if (code === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    this.log(`sandbox ${sbx.id}: ready command did not succeed in time`);
  }

  // The template's start command runs in the background of every new sandbox, as the template's user
  // (finalize phase: /bin/bash -l -c with the template's context). Jupyter runs only if it starts it.
  startStartCmd(sbx, build) {
    let cmd = build.startCmd;
    if (cmd.includes(CI_START)) {
      sbx.jupyter = true;
      sbx.listenInside(49999);
      startDefaultKernel(sbx);
      cmd = cmd.split(CI_START).join('true');
      if (cmd === 'true') return; // nothing else to run
    }
    sbx.startChild = sbx.spawn(['/bin/bash', '-l', '-c', cmd], { user: build.user || 'user', stdio: ['ignore', 'ignore', 'ignore'] });
  }

  expire(sbx) {
    if (!this.sandboxes.has(sbx.id) || sbx.state !== 'running') return;
    if (sbx.autoPause) this.pause(sbx, { memory: sbx.autoPauseMemory }).catch((e) => this.log(`pause of ${sbx.id} failed: ${e.message}`));
    else this.killSandbox(sbx, 'timeout');
  }

  // A pause snapshots the VM with its memory (infra handlers/sandbox_pause.go; `memory: false` is a
  // filesystem-only snapshot): here every process is frozen (SIGSTOP), keeping its pid, memory and
  // open files, and connections to the sandbox drop as the VM stops. Without memory the processes
  // and kernels are killed and resume is a cold boot (a new boot id, the start command again).
  async pause(sbx, { memory = true } = {}) {
    if (sbx.timer) clearTimeout(sbx.timer);
    sbx.timer = null;
    sbx.state = 'paused';
    if (memory) {
      sbx.frozen = true;
      await sbx.freeze(true);
      for (const res of sbx.active) res.socket?.destroy();
      sbx.active.clear();
    } else {
      sbx.stopRuntime();
      sbx.jupyter = false;
      sbx.closeInside(49999);
      if (sbx.startChild) killTree(sbx.startChild);
      sbx.startChild = null;
      sbx.frozen = false;
    }
    this.log(`sandbox ${sbx.id} paused${memory ? '' : ' (filesystem only)'}`);
  }

  async resume(sbx, timeoutS) {
    sbx.state = 'running';
    if (sbx.frozen) {
      sbx.frozen = false;
      await sbx.freeze(false);
    } else {
      sbx.newBoot();
      const build = this.templates.buildOf(sbx);
      if (build && build.startCmd) this.startStartCmd(sbx, build);
    }
    sbx.setTimeout(timeoutS);
    this.log(`sandbox ${sbx.id} resumed`);
  }

  // The sandbox's file tree, copied while its processes are held still (a fork checkpoints the
  // sandbox in place: briefly paused, snapshotted, resumed; handlers/sandbox_fork.go).
  async checkpoint(sbx, to) {
    await sbx.freeze(true);
    try {
      fs.mkdirSync(to, { recursive: true });
      copyTree(sbx.root, to);
    } finally {
      if (!sbx.frozen) await sbx.freeze(false);
    }
  }

  // POST /sandboxes/{id}/fork: `count` new sandboxes from a checkpoint of this one, which keeps running
  // with its id and lease. The checkpoint here is the file tree (processes cannot be cloned: a fork's
  // start command and kernel start anew), with the sandbox's env and metadata.
  async fork(sbx, count, timeoutS) {
    const build = this.templates.buildOf(sbx);
    const template = this.templates.byId.get(sbx.templateID);
    const tmp = path.join(this.stateDir, 'sandboxes', `fork-${randomId('', 12)}`);
    await this.checkpoint(sbx, tmp);
    try {
      const out = [];
      for (let i = 0; i < count; i++) {
        out.push(this.createSandbox({
          resolved: { template, build: { ...build, root: tmp } }, timeoutS, metadata: { ...sbx.metadata },
          envVars: { ...sbx.envVars }, allowInternetAccess: sbx.allowInternetAccess, network: sbx.network,
        }));
      }
      return { sandboxes: out, build };
    } finally {
      rmrf(tmp);
    }
  }

  killSandbox(sbx, why = 'kill') {
    if (!this.sandboxes.has(sbx.id)) return false;
    this.sandboxes.delete(sbx.id);
    if (sbx.timer) clearTimeout(sbx.timer);
    sbx.timer = null;
    sbx.stopRuntime();
    if (sbx.startChild) killTree(sbx.startChild);
    sbx.state = 'killed';
    sbx.closeInside();
    if (sbx.loopback) releaseLoopback(sbx.loopback);
    rmrf(sbx.root);
    rmrf(sbx.bootFile);
    if (sbx.freezer) {
      // thawed so the killed tasks can die; the group goes once they have
      const f = sbx.freezer;
      f.remove();
      let tries = 0;
      const again = () => { if (fs.existsSync(f.dir) && tries++ < 50) { f.remove(); setTimeout(again, 100).unref(); } };
      setTimeout(again, 50).unref();
    }
    this.log(`sandbox ${sbx.id} killed (${why})`);
    return true;
  }

  checkKey(req) {
    const k = req.headers['x-api-key'];
    if (k && this.keys.has(k)) return true;
    const auth = req.headers.authorization;
    if (auth && /^Bearer /i.test(auth) && this.keys.has(auth.slice(7).trim())) return true;
    return false;
  }

  reset() {
    this.hostsSeen.clear();
    for (const sbx of [...this.sandboxes.values()]) this.killSandbox(sbx, 'reset');
    this.faults.clear();
    this.templates.reset();
  }

  state() {
    return {
      sandboxes: [...this.sandboxes.values()].map((s) => ({
        sandboxID: s.id,
        templateID: s.templateID,
        state: s.state,
        endAt: new Date(s.endAt).toISOString(),
        root: s.root,
        processes: [...s.processes.values()].map((p) => p.info()),
        contexts: [...s.contexts.values()].map((c) => c.info()),
        activeRequests: s.active.size,
        egress: s.egress,
      })),
      templates: this.templates.list(),
      faults: this.faults.list(),
      children: liveChildren.size,
      identities: hasIdentities(),
      dataPlaneHosts: Object.fromEntries(this.hostsSeen),
    };
  }

  shutdown() {
    if (this.closed) return;
    this.closed = true;
    for (const sbx of [...this.sandboxes.values()]) this.killSandbox(sbx, 'shutdown');
    this.templates.shutdown();
    stopXattrHelper();
    rmrf(this.stateDir);
  }
}

