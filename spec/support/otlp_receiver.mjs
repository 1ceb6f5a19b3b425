// otlp_receiver.mjs: a loopback OTLP/HTTP trace receiver for the specs (tests only).
//
// Checks every export against the OTLP data model in its JSON encoding (the rules of
// docs/protocols/otlp.md: lowercase hex ids of 32/16 digits and not all zero, 64-bit integers as
// decimal strings, nanosecond timestamps, enums as integers, one AnyValue field per value, unique
// attribute keys, a resource with service.name, the expected instrumentation scope), keeps the spans,
// and answers as told: 200, a planned status (429 with Retry-After, 503, ...), or no listener at all
// ("connection refused").
//
//   node otlp_receiver.mjs [--scope NAME]...     (default scope: glsb; repeat to accept more)
//   prints "listening http://127.0.0.1:<control port> http://127.0.0.1:<otlp port>", then serves:
//   OTLP:     POST /v1/traces
//   control:  GET  /spans     -> {spans, errors, orphans, requests}
//             POST /plan      [{status, retry_after, body, delay_ms}, ...]  answers for the next exports
//             POST /refuse    close the OTLP listener (connections are refused) / POST /accept reopen it
//             POST /reset     forget spans, errors, requests and the plan
// Exits on SIGTERM or when stdin closes.
import http from "node:http";

const scopes = [];
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === "--scope") scopes.push(process.argv[++i]);
}
if (scopes.length === 0) scopes.push("glsb");

let spans = [];
let errors = [];
let requests = [];
let plan = [];

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const UINT = /^[0-9]+$/;
const INT = /^-?[0-9]+$/;
const ANY_FIELDS = ["stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"];

function err(where, what) {
  errors.push(`${where}: ${what}`);
}

// AnyValue -> a plain JS value (strings, booleans, BigInt-free numbers as strings for ints), checking it.
function anyValue(v, where) {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return err(where, "AnyValue must be an object");
  const keys = Object.keys(v).filter((k) => ANY_FIELDS.includes(k));
  const extra = Object.keys(v).filter((k) => !ANY_FIELDS.includes(k));
  if (extra.length) err(where, `unknown AnyValue field(s) ${extra.join(",")}`);
  if (keys.length !== 1) return err(where, `AnyValue must have exactly one value field, has ${keys.length}`);
  const k = keys[0];
  const x = v[k];
  switch (k) {
    case "stringValue":
      if (typeof x !== "string") err(where, "stringValue must be a string");
      return x;
    case "boolValue":
      if (typeof x !== "boolean") err(where, "boolValue must be a boolean");
      return x;
    case "intValue":
      // proto3 JSON: int64 as a decimal string (receivers also take numbers; glsb must send strings)
      if (typeof x !== "string" || !INT.test(x)) err(where, `intValue must be a decimal string, got ${JSON.stringify(x)}`);
      else if (BigInt(x) > 9223372036854775807n || BigInt(x) < -9223372036854775808n) err(where, "intValue out of int64");
      return { int: String(x) };
    case "doubleValue":
      if (typeof x !== "number" && !["NaN", "Infinity", "-Infinity"].includes(x)) err(where, "doubleValue must be a number");
      return x;
    case "arrayValue": {
      if (!x || !Array.isArray(x.values ?? [])) return err(where, "arrayValue.values must be an array");
      return (x.values ?? []).map((e, i) => anyValue(e, `${where}.arrayValue[${i}]`));
    }
    case "kvlistValue":
      return keyValues(x?.values ?? [], `${where}.kvlistValue`);
    case "bytesValue":
      if (typeof x !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(x)) err(where, "bytesValue must be base64");
      return { bytes: x };
  }
}

function keyValues(list, where) {
  const out = {};
  if (list === undefined) return out;
  if (!Array.isArray(list)) {
    err(where, "attributes must be an array");
    return out;
  }
  list.forEach((kv, i) => {
    const w = `${where}[${i}]`;
    if (!kv || typeof kv.key !== "string" || kv.key === "") return err(w, "key must be a non-empty string");
    if (Object.prototype.hasOwnProperty.call(out, kv.key)) err(w, `duplicate attribute key ${kv.key}`);
    out[kv.key] = anyValue(kv.value, `${w}(${kv.key})`);
  });
  return out;
}

// A timestamp: decimal string of nanoseconds, plausible (so milli- or microseconds are caught).
function nanos(x, where) {
  if (typeof x !== "string" || !UINT.test(x)) {
    err(where, `must be a decimal string of nanoseconds, got ${JSON.stringify(x)}`);
    return 0n;
  }
  const v = BigInt(x);
  const now = BigInt(Date.now()) * 1000000n;
  const day = 86400n * 1000000000n;
  if (v < now - day || v > now + 60n * 1000000000n) err(where, `${x} is not a nanosecond time near now`);
  return v;
}

function checkSpan(s, where, resource, scope) {
  if (typeof s.traceId !== "string" || !HEX32.test(s.traceId) || /^0+$/.test(s.traceId)) err(where, `bad traceId ${s.traceId}`);
  if (typeof s.spanId !== "string" || !HEX16.test(s.spanId) || /^0+$/.test(s.spanId)) err(where, `bad spanId ${s.spanId}`);
  if (s.parentSpanId !== undefined && s.parentSpanId !== "" && (!HEX16.test(s.parentSpanId) || /^0+$/.test(s.parentSpanId))) {
    err(where, `bad parentSpanId ${s.parentSpanId}`);
  }
  if (typeof s.name !== "string" || s.name === "") err(where, "name must be a non-empty string");
  if (!Number.isInteger(s.kind) || s.kind < 0 || s.kind > 5) err(where, `kind must be an integer 0-5, got ${JSON.stringify(s.kind)}`);
  if (s.traceState !== undefined && typeof s.traceState !== "string") err(where, "traceState must be a string");
  const start = nanos(s.startTimeUnixNano, `${where}.startTimeUnixNano`);
  const end = nanos(s.endTimeUnixNano, `${where}.endTimeUnixNano`);
  if (end < start) err(where, "ends before it starts");
  const attributes = keyValues(s.attributes, `${where}.attributes`);
  for (const k of ["droppedAttributesCount", "droppedEventsCount", "droppedLinksCount"]) {
    if (s[k] !== undefined && (!Number.isInteger(s[k]) || s[k] < 0)) err(where, `${k} must be a non-negative integer`);
  }
  const events = (s.events ?? []).map((e, i) => {
    const w = `${where}.events[${i}]`;
    const t = nanos(e.timeUnixNano, `${w}.timeUnixNano`);
    if (t < start || t > end) err(w, "event outside its span");
    if (typeof e.name !== "string" || e.name === "") err(w, "name must be a non-empty string");
    return { name: e.name, attributes: keyValues(e.attributes, `${w}.attributes`) };
  });
  let status = { code: 0 };
  if (s.status !== undefined) {
    if (![0, 1, 2].includes(s.status.code ?? 0)) err(where, `status.code must be 0, 1 or 2, got ${JSON.stringify(s.status.code)}`);
    if (s.status.message !== undefined && typeof s.status.message !== "string") err(where, "status.message must be a string");
    status = { code: s.status.code ?? 0, message: s.status.message };
  }
  return {
    traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, name: s.name, kind: s.kind,
    traceState: s.traceState, start: String(start), end: String(end), attributes, events, status, resource, scope,
  };
}

function checkExport(doc, n) {
  const where = `export #${n}`;
  const before = errors.length;
  const out = [];
  if (!doc || !Array.isArray(doc.resourceSpans) || doc.resourceSpans.length === 0) {
    err(where, "resourceSpans must be a non-empty array");
    return { out, bad: true };
  }
  doc.resourceSpans.forEach((rs, i) => {
    const w = `${where}.resourceSpans[${i}]`;
    const resource = keyValues(rs.resource?.attributes, `${w}.resource.attributes`);
    if (typeof resource["service.name"] !== "string" || resource["service.name"] === "") err(w, "resource has no service.name string");
    if (!Array.isArray(rs.scopeSpans)) return err(w, "scopeSpans must be an array");
    rs.scopeSpans.forEach((ss, j) => {
      const ws = `${w}.scopeSpans[${j}]`;
      const scope = { name: ss.scope?.name, version: ss.scope?.version };
      if (!scopes.includes(scope.name)) err(ws, `scope.name ${JSON.stringify(scope.name)} is not one of ${scopes.join(",")}`);
      if (!Array.isArray(ss.spans)) return err(ws, "spans must be an array");
      ss.spans.forEach((s, k) => out.push(checkSpan(s, `${ws}.spans[${k}]`, resource, scope)));
    });
  });
  return { out, bad: errors.length > before };
}

function orphans() {
  const ids = new Set(spans.map((s) => s.traceId + "/" + s.spanId));
  return spans.filter((s) => s.parentSpanId && !ids.has(s.traceId + "/" + s.parentSpanId))
    .map((s) => ({ traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId, name: s.name }));
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
  });
}

function json(res, status, obj, headers = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(obj));
}

const otlp = http.createServer(async (req, res) => {
  const body = await readBody(req);
  const n = requests.length + 1;
  const record = {
    n, at_ms: Date.now(), method: req.method, path: req.url, content_type: req.headers["content-type"],
    headers: req.headers, bytes: body.length, spans: 0,
  };
  requests.push(record);
  if (req.method !== "POST" || req.url !== "/v1/traces") {
    err(`request #${n}`, `${req.method} ${req.url} is not POST /v1/traces`);
    record.answer = 404;
    return json(res, 404, {});
  }
  const step = plan.shift();
  if (step && step.delay_ms) await new Promise((r) => setTimeout(r, step.delay_ms));
  if (step && step.status && step.status !== 200) {
    record.answer = step.status;
    const headers = step.retry_after !== undefined ? { "Retry-After": String(step.retry_after) } : {};
    return json(res, step.status, { code: step.status, message: "as planned" }, headers);
  }
  if (!String(req.headers["content-type"] || "").startsWith("application/json")) {
    err(`request #${n}`, `content-type ${req.headers["content-type"]} is not application/json`);
  }
  let doc;
  try {
    doc = JSON.parse(body.toString("utf8"));
  } catch (e) {
    err(`request #${n}`, `body is not JSON: ${e.message}`);
    record.answer = 400;
    return json(res, 400, { message: "bad JSON" });
  }
  const { out } = checkExport(doc, n);
  record.spans = out.length;
  spans.push(...out);
  record.answer = 200;
  return json(res, 200, step && step.body !== undefined ? step.body : {});
});

let otlpPort = 0;
function listenOtlp() {
  return new Promise((resolve) => otlp.listen(otlpPort, "127.0.0.1", () => {
    otlpPort = otlp.address().port;
    resolve();
  }));
}

const control = http.createServer(async (req, res) => {
  const body = await readBody(req);
  const path = new URL(req.url, "http://x").pathname;
  if (req.method === "GET" && path === "/spans") return json(res, 200, { spans, errors, orphans: orphans(), requests });
  if (req.method === "POST" && path === "/plan") {
    plan.push(...JSON.parse(body.toString() || "[]"));
    return json(res, 200, { planned: plan.length });
  }
  if (req.method === "POST" && path === "/refuse") {
    otlp.closeAllConnections?.();
    return otlp.close(() => json(res, 200, { listening: false }));
  }
  if (req.method === "POST" && path === "/accept") {
    if (!otlp.listening) await listenOtlp();
    return json(res, 200, { listening: true });
  }
  if (req.method === "POST" && path === "/reset") {
    spans = [];
    errors = [];
    requests = [];
    plan = [];
    return json(res, 200, {});
  }
  return json(res, 404, { message: `no ${req.method} ${path}` });
});

await listenOtlp();
control.listen(0, "127.0.0.1", () => {
  process.stdout.write(`listening http://127.0.0.1:${control.address().port} http://127.0.0.1:${otlpPort}\n`);
});
process.on("SIGTERM", () => process.exit(0));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
