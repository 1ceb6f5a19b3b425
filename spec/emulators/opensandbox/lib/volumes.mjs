// Sandbox volumes as the Docker runtime has them (server/opensandbox_server/services/validators.py
// ensure_volumes_valid, services/docker/volumes.py): `host` binds a directory of this machine, `pvc` a
// Docker named volume (claimName is the volume's name), each at mountPath, read-only or not, with an
// optional subPath. The emulator's named volumes are directories of its state directory, made with
// POST /_emulator/volumes (for `docker volume create`) or by `pvc.createIfNotExists`. `ossfs` needs
// a FUSE mount and is refused. Errors are the server's {code, message} with its status.
import fs from 'node:fs';
import path from 'node:path';

const VOLUME_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const K8S_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

class VolumeError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const bad = (code, message) => new VolumeError(400, code, message);

function checkHostPath(p, allowed) {
  if (!p) throw bad('VOLUME::INVALID_HOST_PATH', 'Host path cannot be empty.');
  if (!/^(\/|[A-Za-z]:[\\/])/.test(p)) {
    throw bad('VOLUME::INVALID_HOST_PATH', `Host path '${p}' must be an absolute path starting with '/' or a Windows drive letter (e.g. 'C:\\' or 'D:/').`);
  }
  if (p.includes('/..') || p === '/..') throw bad('VOLUME::INVALID_HOST_PATH', `Host path '${p}' contains path traversal component '..'.`);
  if (p.includes('//') || (p.length > 1 && p.endsWith('/'))) throw bad('VOLUME::INVALID_HOST_PATH', `Host path '${p}' is not normalized. Remove redundant slashes.`);
  if (allowed && !allowed.some((a) => p === a || p.startsWith(a.replace(/\/$/, '') + '/'))) {
    throw bad('VOLUME::HOST_PATH_NOT_ALLOWED', `Host path '${p}' is not under any allowed prefix. Allowed prefixes: ['${allowed.join("', '")}']`);
  }
}

export class Volumes {
  // allowedHostPaths: the server's storage.allowed_host_paths (null: any path)
  constructor(stateDir, allowedHostPaths) {
    this.dir = path.join(stateDir, 'volumes');
    fs.mkdirSync(this.dir, { recursive: true });
    this.allowed = allowedHostPaths && allowedHostPaths.length ? allowedHostPaths : null;
    this.named = new Map(); // name -> {dir, managed}
  }

  // A named volume (docker volume create); files: {relative path: content} seeds it.
  create(name, files = {}, managed = false) {
    if (!K8S_NAME.test(String(name))) throw bad('VOLUME::INVALID_PVC_NAME', `PVC claim name '${name}' is not a valid Kubernetes resource name.`);
    let v = this.named.get(name);
    if (!v) {
      v = { dir: path.join(this.dir, name), managed };
      fs.mkdirSync(v.dir, { recursive: true });
      this.named.set(name, v);
    }
    for (const [rel, content] of Object.entries(files)) {
      const to = path.join(v.dir, rel);
      if (!to.startsWith(v.dir + path.sep)) throw bad('VOLUME::INVALID_SUB_PATH', `'${rel}' is outside the volume`);
      fs.mkdirSync(path.dirname(to), { recursive: true });
      fs.writeFileSync(to, String(content));
    }
    return v;
  }

  remove(name) {
    const v = this.named.get(name);
    if (!v) return false;
    fs.rmSync(v.dir, { recursive: true, force: true });
    this.named.delete(name);
    return true;
  }

  list() {
    return [...this.named.entries()].map(([name, v]) => ({ name, managed: v.managed }));
  }

  // prepare(volumes) -> {mounts: [{name, host, path, readOnly}], created: [names to remove with the
  // sandbox]}; throws a VolumeError (status, code, message).
  prepare(volumes) {
    if (!Array.isArray(volumes) || volumes.length === 0) return { mounts: [], created: [] };
    const seen = new Set();
    for (const v of volumes) {
      if (seen.has(v.name)) throw bad('VOLUME::DUPLICATE_NAME', `Duplicate volume name '${v.name}'. Each volume must have a unique name.`);
      seen.add(v.name);
      if (!v.name) throw bad('VOLUME::INVALID_NAME', 'Volume name cannot be empty.');
      if (String(v.name).length > 63) throw bad('VOLUME::INVALID_NAME', `Volume name '${v.name}' exceeds maximum length of 63 characters.`);
      if (!VOLUME_NAME.test(v.name)) throw bad('VOLUME::INVALID_NAME', `Volume name '${v.name}' is not a valid DNS label.`);
      if (!v.mountPath) throw bad('VOLUME::INVALID_MOUNT_PATH', 'Mount path cannot be empty.');
      if (!String(v.mountPath).startsWith('/')) throw bad('VOLUME::INVALID_MOUNT_PATH', `Mount path '${v.mountPath}' must be an absolute path starting with '/'.`);
      if (v.subPath) {
        if (v.subPath.startsWith('/')) throw bad('VOLUME::INVALID_SUB_PATH', `SubPath '${v.subPath}' must be a relative path, not absolute.`);
        if (v.subPath.split('/').includes('..')) throw bad('VOLUME::INVALID_SUB_PATH', `SubPath '${v.subPath}' contains path traversal '..' which is not allowed.`);
      }
      const n = [v.host, v.pvc, v.ossfs].filter((x) => x != null).length;
      if (n !== 1) {
        throw bad('VOLUME::INVALID_BACKEND', `Volume '${v.name}' must specify exactly one backend (host, pvc, ossfs), but ${n === 0 ? 'none was' : 'multiple were'} provided.`);
      }
      if (v.host) checkHostPath(v.host.path, this.allowed);
      if (v.pvc) {
        const c = v.pvc.claimName;
        if (!c) throw bad('VOLUME::INVALID_PVC_NAME', 'PVC claim name cannot be empty.');
        if (!K8S_NAME.test(c)) throw bad('VOLUME::INVALID_PVC_NAME', `PVC claim name '${c}' is not a valid Kubernetes resource name.`);
      }
    }
    const mounts = [];
    const created = [];
    try {
      for (const v of volumes) {
        let host;
        if (v.host) {
          host = v.subPath ? path.normalize(path.join(v.host.path, v.subPath)) : v.host.path;
          if (this.allowed && host !== v.host.path) checkHostPath(host, this.allowed);
          // a missing directory is made (an existing file is bound as it is)
          let isFile = false;
          try { isFile = fs.statSync(host).isFile(); } catch { isFile = false; }
          if (!isFile) {
            try {
              fs.mkdirSync(host, { recursive: true });
            } catch (e) {
              throw new VolumeError(500, 'VOLUME::HOST_PATH_CREATE_FAILED', `Volume '${v.name}': could not ensure host path directory exists at '${host}': ${e.code === 'EACCES' ? 'PermissionError' : 'OSError'}`);
            }
          }
        } else if (v.pvc) {
          let nv = this.named.get(v.pvc.claimName);
          if (!nv) {
            if (!v.pvc.createIfNotExists) {
              throw bad('VOLUME::PVC_NOT_FOUND', `Volume '${v.name}': Docker named volume '${v.pvc.claimName}' does not exist. Named volumes must be created before sandbox creation (e.g., 'docker volume create <name>').`);
            }
            nv = this.create(v.pvc.claimName, {}, true);
            if (v.pvc.deleteOnSandboxTermination) created.push(v.pvc.claimName);
          }
          host = v.subPath ? path.join(nv.dir, v.subPath) : nv.dir;
          fs.mkdirSync(host, { recursive: true });
        } else {
          throw bad('VOLUME::UNSUPPORTED_BACKEND', `Volume '${v.name}': the ossfs backend needs a FUSE mount, which the emulator does not make.`);
        }
        mounts.push({ name: v.name, host, path: path.posix.normalize(v.mountPath), readOnly: !!v.readOnly });
      }
    } catch (e) {
      for (const n of created) this.remove(n);
      throw e;
    }
    return { mounts, created };
  }
}

export { VolumeError };
