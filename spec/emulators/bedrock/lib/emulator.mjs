// Emulator state: sessions, custom interpreters, client tokens already seen, faults and the log
// of requests (what tests assert on: tokens reused across retries, headers left unsigned...).
import fs from 'node:fs';
import path from 'node:path';
import { rmrf, liveChildren, makeStateDir } from '../../e2b/lib/runtime.mjs';
import { Faults } from './faults.mjs';
import { ControlPlane } from './control.mjs';
import { validation } from './errors.mjs';

const LOG_LIMIT = 2000;

export class Emulator {
  constructor({ credentials, log = () => {}, createDelayMs, maxSessions = 0 }) {
    this.credentials = credentials;
    this.log = log;
    this.maxSessions = maxSessions;
    // removed on every exit path, and by the next emulator if this one is SIGKILLed (e2b runtime.mjs)
    this.stateDir = makeStateDir('glsb-bedrock-emu-');
    fs.mkdirSync(path.join(this.stateDir, 'sessions'));
    this.sessions = new Map(); // sessionId -> Session (READY and TERMINATED)
    this.tokens = new Map(); // "<op>:<scope>:<clientToken>" -> {params, response}
    this.faults = new Faults();
    this.control = new ControlPlane(this, { createDelayMs });
    this.requests = [];
    this.baseUrl = null;
    this.closed = false;
  }

  // Idempotency: a clientToken seen before with the same parameters gets the first answer again;
  // with other parameters it is refused (ValidationException, reason IdempotentParameterMismatch).
  idempotent(op, scope, token, params, fn) {
    const key = `${op}:${scope}:${token}`;
    const seen = this.tokens.get(key);
    const p = JSON.stringify(params);
    if (seen) {
      if (seen.params !== p) {
        throw validation('The request uses the same client token as a previous, but non-identical request. Do not reuse a client token with different requests, unless the requests are identical.',
          'IdempotentParameterMismatchException');
      }
      return { ...seen.response, replayed: true };
    }
    const response = fn();
    this.tokens.set(key, { params: p, response });
    return response;
  }

  liveSessions() {
    return [...this.sessions.values()].filter((s) => s.status === 'READY');
  }

  terminate(session, why) {
    if (session.status === 'TERMINATED') return false;
    session.stop(why);
    this.log(`session ${session.id} terminated (${why})`);
    return true;
  }

  record(entry) {
    this.requests.push(entry);
    if (this.requests.length > LOG_LIMIT) this.requests.splice(0, this.requests.length - LOG_LIMIT);
  }

  reset() {
    for (const s of this.sessions.values()) this.terminate(s, 'reset');
    this.sessions.clear();
    this.tokens.clear();
    this.faults.clear();
    this.control.shutdown();
    this.control.interpreters.clear();
    this.requests = [];
  }

  state() {
    return {
      sessions: [...this.sessions.values()].map((s) => s.info()),
      interpreters: this.control.list('CUSTOM').map((i) => ({ ...i.summary(), failureReason: i.failureReason })),
      faults: this.faults.list(),
      children: liveChildren.size,
      baseUrl: this.baseUrl,
    };
  }

  shutdown() {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.sessions.values()) this.terminate(s, 'shutdown');
    this.control.shutdown();
    rmrf(this.stateDir);
  }
}
