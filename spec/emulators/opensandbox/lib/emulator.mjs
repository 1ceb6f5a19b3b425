// Emulator state: sandboxes and snapshots, their life cycles (Pending -> Running, pause, expiry).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { uuid } from './util.mjs';
import { makeTree, rmrf, signalTree, liveChildren, hasBwrap, registerSandbox, updateSandbox, unregisterSandbox } from './runtime.mjs';
import { Volumes } from './volumes.mjs';
import { closeSessions } from './sessions.mjs';
import { makeFreezer } from '../../e2b/lib/freezer.mjs';
import { processEnv, rulesEnv, isCidr } from '../../egress/egress.mjs';
import { Faults } from './faults.mjs';

// Knobs a test may change at run time (POST /_emulator/config) or at start (command line).
export const DEFAULT_CONFIG = {
  provisionMs: 0,          // how long a new sandbox stays Pending before Running
  execdNotReadyPings: 0,   // per new sandbox: this many /ping answered 502 before execd is "up"
  graceMs: 200,            // execd holds a command stream open this long after its last event
  snapshotMs: 100,         // a snapshot stays Creating this long before Ready
  pingIntervalMs: 3000,    // execd's in-stream ping event spacing
};

export class Sandbox {
  constructor(emu, opts) {
    this.emu = emu;
    this.id = opts.id;
    this.root = opts.root;
    this.image = opts.image;                  // {uri, auth?} or undefined (snapshot restore)
    this.snapshotId = opts.snapshotId;
    this.interpreter = opts.interpreter;      // a code-interpreter image: /code works
    this.entrypoint = opts.entrypoint;
    this.env = opts.env || {};
    this.metadata = opts.metadata || {};
    this.extensions = opts.extensions;
    this.platform = opts.platform;
    this.resourceLimits = opts.resourceLimits;
    this.networkPolicy = opts.networkPolicy;
    this.createdAt = Date.now();
    this.expiresAt = opts.timeoutS == null ? null : this.createdAt + opts.timeoutS * 1000;
    this.state = 'Pending';
    this.reason = 'CONTAINER_STARTING';
    this.message = 'Sandbox container is starting.';
    this.lastTransitionAt = this.createdAt;
    this.notReadyPings = opts.notReadyPings || 0;
    this.commands = new Map();   // command id -> Command (commands.mjs)
    this.contexts = new Map();   // context id -> Context (code.mjs)
    this.defaultContexts = new Map(); // language -> Context
    this.active = new Set();     // in-flight execd responses
    this.sessions = new Map();   // bash session id -> session (sessions.mjs)
    this.mounts = opts.mounts || [];
    this.volumesCreated = opts.volumesCreated || []; // named volumes to remove with the sandbox
    // the sidecar's policy: with a networkPolicy, defaultAction is deny unless it says otherwise
    // (specs/sandbox-lifecycle.yml NetworkPolicy); without one, everything is allowed
    const np = opts.networkPolicy;
    this.egressPolicy = { defaultAction: np ? (np.defaultAction || 'deny') : 'allow', egress: (np && np.egress) || [] };
    this.hasPolicy = !!np;
    this.timer = null;
  }

  // The sidecar's policy as the rules egress.c enforces in the sandbox's processes: domain targets
  // by the addresses they resolve to (the dns mode's learned sets), IP/CIDR targets directly
  // (dns+nft mode). Rules apply to processes started after a change, as a new connection meets new
  // nftables sets. Where an allow and a deny rule overlap, allow wins (the sidecar's first match).
  egressRules() {
    if (!this.hasPolicy) return null;
    const r = { allow: [], deny: [], names: [], denyNames: [], defaultDeny: this.egressPolicy.defaultAction !== 'allow' };
    for (const rule of this.egressPolicy.egress) {
      const t = String(rule.target);
      if (isCidr(t)) (rule.action === 'allow' ? r.allow : r.deny).push(t);
      else (rule.action === 'allow' ? r.names : r.denyNames).push(t);
    }
    return rulesEnv(r) || 'default=allow';
  }

  // What every process of the sandbox gets (runtime.mjs registerSandbox): volumes, egress, freezer.
  register() {
    const egress = processEnv(this.egressRules(), this.emu.stateDir, hasBwrap());
    if (egress.error) this.emu.log(`sandbox ${this.id}: egress rules not enforced: ${egress.error}`);
    registerSandbox(this.root, { mounts: this.mounts, egress, cgroupProcs: this.freezer ? this.freezer.procs : null });
  }

  updateEgress() {
    updateSandbox(this.root, { egress: processEnv(this.egressRules(), this.emu.stateDir, hasBwrap()) });
  }

  async freeze(on) {
    if (this.freezer) return this.freezer.freeze(on);
    for (const c of this.children()) signalTree(c, on ? 'SIGSTOP' : 'SIGCONT');
    return undefined;
  }

  transition(state, reason, message) {
    this.state = state;
    this.reason = reason;
    this.message = message;
    this.lastTransitionAt = Date.now();
  }

  arm() {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.expiresAt == null) return;
    const ms = Math.max(0, this.expiresAt - Date.now());
    this.timer = setTimeout(() => this.emu.killSandbox(this, 'expired'), Math.min(ms, 2 ** 31 - 1));
    this.timer.unref?.();
  }

  // Every process of the sandbox: command process groups and code-context kernels.
  children() {
    const out = [];
    for (const c of this.commands.values()) if (c.child && c.running) out.push(c.child);
    for (const c of this.contexts.values()) if (c.child) out.push(c.child);
    return out;
  }

  stopRuntime() {
    for (const c of this.commands.values()) c.kill('sandbox');
    for (const c of this.contexts.values()) c.close();
    this.contexts.clear();
    this.defaultContexts.clear();
    // The container is gone: connections to it drop.
    for (const res of this.active) res.socket?.destroy();
    this.active.clear();
  }

  status() {
    const s = { state: this.state, reason: this.reason, message: this.message,
      lastTransitionAt: new Date(this.lastTransitionAt).toISOString() };
    return s;
  }

  // CreateSandboxResponse: no image / snapshotId (those appear only on GET).
  created() {
    const out = { id: this.id, status: this.status(), metadata: this.metadata };
    if (this.expiresAt != null) out.expiresAt = new Date(this.expiresAt).toISOString();
    out.createdAt = new Date(this.createdAt).toISOString();
    out.entrypoint = this.entrypoint;
    if (this.platform) out.platform = this.platform;
    return out;
  }

  info() {
    const out = { id: this.id };
    if (this.snapshotId) out.snapshotId = this.snapshotId;
    else out.image = { uri: this.image.uri };
    if (this.platform) out.platform = this.platform;
    out.status = this.status();
    out.metadata = this.metadata;
    if (this.extensions && Object.keys(this.extensions).length) out.extensions = this.extensions;
    out.entrypoint = this.entrypoint;
    if (this.expiresAt != null) out.expiresAt = new Date(this.expiresAt).toISOString();
    out.createdAt = new Date(this.createdAt).toISOString();
    return out;
  }
}

export class Snapshot {
  constructor(opts) {
    this.id = opts.id;
    this.sandboxId = opts.sandboxId;
    this.name = opts.name;
    this.root = opts.root;
    this.interpreter = opts.interpreter;
    this.env = opts.env;
    this.createdAt = Date.now();
    this.state = 'Creating';
    this.reason = 'snapshot_accepted';
    this.message = 'Snapshot creation accepted.';
    this.lastTransitionAt = this.createdAt;
  }

  info() {
    const out = { id: this.id, sandboxId: this.sandboxId };
    if (this.name != null) out.name = this.name;
    out.status = { state: this.state, reason: this.reason, message: this.message,
      lastTransitionAt: new Date(this.lastTransitionAt).toISOString() };
    out.createdAt = new Date(this.createdAt).toISOString();
    return out;
  }
}

export class Emulator {
  constructor({ keys, log = () => {}, config = {}, allowedHostPaths = [] }) {
    this.keys = new Set(keys);
    this.log = log;
    this.config = { ...DEFAULT_CONFIG, ...config };
    this.stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'glsb-opensandbox-emu-'));
    fs.mkdirSync(path.join(this.stateDir, 'sandboxes'));
    fs.mkdirSync(path.join(this.stateDir, 'snapshots'));
    this.volumes = new Volumes(this.stateDir, allowedHostPaths);
    this.sandboxes = new Map();
    this.snapshots = new Map();
    this.metricsEvents = [];
    this.faults = new Faults();
    this.baseUrl = null; // set once listening
    this.closed = false;
  }

  createSandbox(opts) {
    const id = uuid();
    const root = path.join(this.stateDir, 'sandboxes', id);
    if (opts.fromSnapshot) fs.cpSync(opts.fromSnapshot.root, root, { recursive: true, verbatimSymlinks: true });
    else fs.mkdirSync(root, { recursive: true });
    makeTree(root);
    const sbx = new Sandbox(this, { ...opts, id, root, notReadyPings: this.config.execdNotReadyPings });
    // `docker pause` is the cgroup freezer: the sandbox's processes share one (e2b/lib/freezer.mjs)
    sbx.freezer = hasBwrap() ? makeFreezer('glsb-opensandbox-emu-', id) : null;
    sbx.register();
    this.sandboxes.set(id, sbx);
    sbx.arm();
    // The spec promises Pending; Docker answers once the container runs. Running after provisionMs.
    const up = () => {
      if (this.sandboxes.get(id) === sbx && sbx.state === 'Pending') {
        sbx.transition('Running', 'CONTAINER_RUNNING', 'Sandbox container is running.');
      }
    };
    if (this.config.provisionMs > 0) setTimeout(up, this.config.provisionMs).unref();
    else setImmediate(up);
    this.log(`sandbox ${id} created (${opts.snapshotId ? 'snapshot ' + opts.snapshotId : opts.image.uri})`);
    return sbx;
  }

  async pause(sbx) {
    sbx.transition('Paused', 'CONTAINER_PAUSED', 'Sandbox container is paused.');
    // docker pause freezes every process: state (a code context's variables) survives resume.
    await sbx.freeze(true);
    this.log(`sandbox ${sbx.id} paused`);
  }

  async resume(sbx) {
    await sbx.freeze(false);
    sbx.transition('Running', 'CONTAINER_RUNNING', 'Sandbox container is running.');
    this.log(`sandbox ${sbx.id} resumed`);
  }

  killSandbox(sbx, why = 'delete') {
    if (this.sandboxes.get(sbx.id) !== sbx) return false;
    this.sandboxes.delete(sbx.id);
    if (sbx.timer) clearTimeout(sbx.timer);
    sbx.timer = null;
    if (sbx.freezer) sbx.freezer.remove(); // thawed, so the killed tasks can die
    for (const c of sbx.children()) signalTree(c, 'SIGCONT');
    closeSessions(sbx);
    sbx.stopRuntime();
    sbx.transition('Terminated', why === 'expired' ? 'SANDBOX_EXPIRED' : 'SANDBOX_DELETED', `Sandbox ${why}.`);
    unregisterSandbox(sbx.root);
    for (const name of sbx.volumesCreated) this.volumes.remove(name);
    if (sbx.freezer) {
      const f = sbx.freezer;
      let tries = 0;
      const again = () => { if (fs.existsSync(f.dir) && tries++ < 50) { f.remove(); setTimeout(again, 100).unref(); } };
      setTimeout(again, 50).unref();
    }
    rmrf(sbx.root);
    this.log(`sandbox ${sbx.id} removed (${why})`);
    return true;
  }

  // A snapshot copies the sandbox's writable tree now (the container's file system); it becomes Ready
  // after snapshotMs, as the real one does once the image is committed.
  createSnapshot(sbx, name) {
    const id = uuid();
    const root = path.join(this.stateDir, 'snapshots', id);
    fs.cpSync(sbx.root, root, { recursive: true, verbatimSymlinks: true });
    const snap = new Snapshot({ id, sandboxId: sbx.id, name, root, interpreter: sbx.interpreter, env: sbx.env });
    this.snapshots.set(id, snap);
    const ready = () => {
      if (this.snapshots.get(id) !== snap || snap.state !== 'Creating') return;
      snap.state = 'Ready';
      snap.reason = 'snapshot_runtime_ready';
      snap.message = 'Snapshot is ready.';
      snap.lastTransitionAt = Date.now();
    };
    setTimeout(ready, this.config.snapshotMs).unref();
    this.log(`snapshot ${id} of ${sbx.id} (${name || 'no name'})`);
    return snap;
  }

  deleteSnapshot(snap) {
    this.snapshots.delete(snap.id);
    rmrf(snap.root);
  }

  checkKey(req) {
    const k = req.headers['open-sandbox-api-key'];
    if (k === undefined || k === '') return 'missing';
    return this.keys.has(String(k)) ? 'ok' : 'invalid';
  }

  reset() {
    for (const sbx of [...this.sandboxes.values()]) this.killSandbox(sbx, 'reset');
    for (const snap of [...this.snapshots.values()]) this.deleteSnapshot(snap);
    this.faults.clear();
    this.metricsEvents = [];
    this.config = { ...this.initialConfig || DEFAULT_CONFIG };
  }

  state() {
    return {
      sandboxes: [...this.sandboxes.values()].map((s) => ({
        id: s.id,
        state: s.state,
        expiresAt: s.expiresAt == null ? null : new Date(s.expiresAt).toISOString(),
        root: s.root,
        commands: [...s.commands.values()].map((c) => c.info()),
        contexts: [...s.contexts.values()].map((c) => c.info()),
        activeRequests: s.active.size,
        mounts: s.mounts,
        egress: s.egressRules(),
        sessions: s.sessions.size,
      })),
      volumes: this.volumes.list(),
      snapshots: [...this.snapshots.values()].map((s) => s.info()),
      metricsEvents: this.metricsEvents,
      config: this.config,
      faults: this.faults.list(),
      children: liveChildren.size,
      bwrap: hasBwrap(),
      baseUrl: this.baseUrl,
    };
  }

  shutdown() {
    if (this.closed) return;
    this.closed = true;
    for (const sbx of [...this.sandboxes.values()]) this.killSandbox(sbx, 'shutdown');
    rmrf(this.stateDir);
  }
}
