// Conformance: glsb's tracing beside the official OpenTelemetry JS SDK (@opentelemetry/sdk-trace-node,
// exporter-trace-otlp-http; versions pinned in spec/package.json), both exporting to the loopback
// receiver of spec/support/otlp_receiver.mjs, which checks every export against the OTLP data model.
//
//   1. A Node span is the parent: its traceparent goes to a glsb-lua script in TRACEPARENT, and the
//      receiver sees glsb's spans in the Node span's trace, under it.
//   2. The other way: glsb's traceparent header on an HTTP request is read by the SDK's own
//      W3CTraceContextPropagator in a Node server, whose server span lands under glsb's client span.
//   3. The receiver accepts the official exporter's JSON exactly as it accepts glsb's (same checks).
//
//   cd spec && npm ci && node --test conformance/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { context, propagation, trace, SpanKind } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { NodeTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const GLSB_LUA = path.join(ROOT, 'build', 'glsb-lua');
const SCOPE = 'glsb-conformance';

for (const k of Object.keys(process.env)) if (k.startsWith('OTEL_') || k === 'TRACEPARENT' || k === 'TRACESTATE') delete process.env[k];

let receiver = null;
let control = null;
let endpoint = null;
let provider = null;

async function firstLine(child, what) {
  let stderr = '';
  child.stderr?.on('data', (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    const t = setTimeout(() => reject(new Error(`${what} did not start in 10 s: ${stderr}`)), 10000);
    rl.once('line', (line) => { clearTimeout(t); rl.close(); resolve(line); });
    child.once('exit', (code) => { clearTimeout(t); reject(new Error(`${what} exited (${code}): ${stderr}`)); });
  });
}

async function received() {
  const res = await fetch(`${control}/spans`);
  return res.json();
}

function runGlsb(script, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(GLSB_LUA, ['-e', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`glsb-lua timed out: ${err}`)); }, 60000);
    child.on('exit', (code) => { clearTimeout(t); resolve({ code, out, err }); });
  });
}

before(async () => {
  receiver = spawn('node', [path.join(ROOT, 'spec', 'support', 'otlp_receiver.mjs'), '--scope', 'glsb', '--scope', SCOPE],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  const line = await firstLine(receiver, 'otlp receiver');
  [, control, endpoint] = line.match(/^listening (\S+) (\S+)/);
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'node-parent' }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint}/v1/traces` }))],
  });
  provider.register({ propagator: new W3CTraceContextPropagator() });
});

after(async () => {
  await provider?.shutdown();
  receiver?.kill('SIGTERM');
});

test('a glsb-lua script run with a Node span\'s traceparent makes its spans children of that span', async () => {
  await fetch(`${control}/reset`, { method: 'POST' });
  const tracer = trace.getTracer(SCOPE);
  const parent = tracer.startSpan('node.parent');
  const carrier = {};
  propagation.inject(trace.setSpan(context.active(), parent), carrier);
  assert.match(carrier.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  // The script's own span, and a client span for an HTTP request it makes (to the receiver's control
  // port: any URL does).
  const script = `
    local glsb = require "glsb"
    local http = require "glsb.http"
    local s = glsb.trace.start_span("glsb.script")
    glsb.trace.with_span(s, function()
      assert(http.request{ url = "${control}/spans", timeout = 10 }.status == 200)
    end)
    s:finish()`;
  const r = await runGlsb(script, {
    TRACEPARENT: carrier.traceparent, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SERVICE_NAME: 'glsb-child',
  });
  assert.equal(r.code, 0, r.err);
  assert.equal(r.err, '');
  parent.end();
  await provider.forceFlush();

  const got = await received();
  assert.deepEqual(got.errors, [], 'the receiver found exports that break the OTLP data model');
  const node = got.spans.find((s) => s.name === 'node.parent');
  assert.ok(node, 'the Node SDK exported its span');
  assert.equal(node.scope.name, SCOPE);
  const script_span = got.spans.find((s) => s.name === 'glsb.script');
  const client = got.spans.find((s) => s.name === 'GET');
  assert.ok(script_span && client, `glsb exported its spans: ${got.spans.map((s) => s.name)}`);
  assert.equal(script_span.traceId, node.traceId);
  assert.equal(script_span.parentSpanId, node.spanId);
  assert.equal(client.traceId, node.traceId);
  assert.equal(client.parentSpanId, script_span.spanId);
  assert.equal(client.kind, 3);
  assert.equal(script_span.resource['service.name'], 'glsb-child');
  assert.equal(script_span.scope.name, 'glsb');
  assert.deepEqual(got.orphans, [], 'every parent link resolves to a received span');
  // glsb's timestamps are on the same clock as Node's: the child lies within its parent
  assert.ok(BigInt(script_span.start) >= BigInt(node.start) && BigInt(script_span.end) <= BigInt(node.end));
});

test('the SDK\'s W3C propagator reads glsb\'s traceparent: a Node server span lands under glsb\'s client span', async () => {
  await fetch(`${control}/reset`, { method: 'POST' });
  const tracer = trace.getTracer(SCOPE);
  const server = http.createServer((req, res) => {
    const ctx = propagation.extract(context.active(), req.headers);
    const span = tracer.startSpan('node.server', { kind: SpanKind.SERVER }, ctx);
    res.writeHead(200);
    res.end('ok');
    span.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}/work?token=secret`;
  const script = `
    local http = require "glsb.http"
    local trace = require "glsb.trace"
    local remote = trace.extract("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=v")
    trace.with_span(remote, function() assert(http.request{ url = "${url}", timeout = 10 }.status == 200) end)`;
  const r = await runGlsb(script, { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint });
  server.close();
  assert.equal(r.code, 0, r.err);
  await provider.forceFlush();
  const got = await received();
  assert.deepEqual(got.errors, []);
  const client = got.spans.find((s) => s.name === 'GET');
  const srv = got.spans.find((s) => s.name === 'node.server');
  assert.ok(client && srv, `spans: ${got.spans.map((s) => s.name)}`);
  assert.equal(client.traceId, '0af7651916cd43dd8448eb211c80319c');
  assert.equal(client.parentSpanId, 'b7ad6b7169203331');
  assert.equal(client.traceState, 'vendor=v');
  assert.equal(srv.traceId, client.traceId);
  assert.equal(srv.parentSpanId, client.spanId);
  assert.equal(srv.traceState, 'vendor=v', 'the tracestate crossed unchanged');
  assert.equal(client.attributes['url.full'], url.replace('secret', 'REDACTED'));
});
