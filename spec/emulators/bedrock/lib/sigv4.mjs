// SigV4 verification of every request with AWS's own signer (@smithy/signature-v4): the request
// as received is signed again with the caller's scope, date and SignedHeaders list, and the
// signatures must match (docs/protocols/bedrock.md §4.1). Failures answer as AWS's front end
// does: 403 with x-amzn-errortype and the real message texts.
import crypto from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@aws-crypto/sha256-js';
import { AwsError } from './errors.mjs';
import { sha256hex } from './util.mjs';

export const SERVICE = 'bedrock-agentcore';
const SKEW_MS = 5 * 60 * 1000;

// The AWS documentation key pair, accepted with or without a session token.
export const DEFAULT_CREDENTIALS = [{ accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' }];

// "AKID:SECRET" or "AKID:SECRET:TOKEN" (then exactly that token is required).
export function parseCredential(s) {
  const i = s.indexOf(':');
  if (i <= 0) throw new Error(`--credentials wants AKID:SECRET[:TOKEN], got ${JSON.stringify(s)}`);
  const rest = s.slice(i + 1);
  const j = rest.indexOf(':');
  if (j < 0) return { accessKeyId: s.slice(0, i), secretAccessKey: rest };
  return { accessKeyId: s.slice(0, i), secretAccessKey: rest.slice(0, j), sessionToken: rest.slice(j + 1) };
}

function parseAuthorization(value) {
  const m = /^AWS4-HMAC-SHA256\s+(.*)$/.exec(value);
  if (!m) return null;
  const out = {};
  for (const part of m[1].split(',')) {
    const kv = part.trim();
    const eq = kv.indexOf('=');
    if (eq > 0) out[kv.slice(0, eq)] = kv.slice(eq + 1);
  }
  return out;
}

// Raw query string -> {decodedKey: string | string[]} as @smithy/querystring-parser builds it.
function parseQuery(raw) {
  const query = {};
  if (!raw) return query;
  for (const pair of raw.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const dec = (s) => {
      try { return decodeURIComponent(s); } catch { return s; }
    };
    const k = dec(eq < 0 ? pair : pair.slice(0, eq));
    const v = eq < 0 ? '' : dec(pair.slice(eq + 1));
    if (query[k] === undefined) query[k] = v;
    else if (Array.isArray(query[k])) query[k].push(v);
    else query[k] = [query[k], v];
  }
  return query;
}

// Header values as the signer must see them: repeated headers joined with "," (rawHeaders keeps
// them apart; Node would join most with ", ").
function rawHeaderMap(req) {
  const map = {};
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    map[name] = map[name] === undefined ? raw[i + 1] : `${map[name]},${raw[i + 1]}`;
  }
  return map;
}

function amzDate(s) {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s || '');
  if (!m) return null;
  return new Date(Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]));
}

function fmt(d) {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}Z$/, 'Z');
}

// verify(req, body, credentials, now) -> {accessKeyId, region, signedHeaders, unsignedHeaders,
// sessionToken} or throws AwsError. `credentials`: array of {accessKeyId, secretAccessKey,
// sessionToken?}.
export async function verify(req, body, credentials, now = Date.now()) {
  const headers = rawHeaderMap(req);
  const auth = headers.authorization;
  if (!auth) throw new AwsError('MissingAuthenticationTokenException', 'Missing Authentication Token');
  const parts = parseAuthorization(auth);
  if (!parts) {
    throw new AwsError('IncompleteSignatureException',
      `Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. Authorization=${auth.split(' ')[0]}`);
  }
  const missing = ['Credential', 'SignedHeaders', 'Signature'].filter((k) => !parts[k]);
  if (missing.length) {
    throw new AwsError('IncompleteSignatureException',
      missing.map((k) => `Authorization header requires '${k}' parameter.`).join(' ') + ` Authorization=${auth}`);
  }
  const scope = parts.Credential.split('/');
  if (scope.length !== 5 || scope[4] !== 'aws4_request') {
    throw new AwsError('IncompleteSignatureException',
      `Credential should have 5 parts: "AKID/yyyymmdd/region/service/aws4_request". Credential=${parts.Credential}`);
  }
  const [accessKeyId, shortDate, region, service] = scope;
  const cred = credentials.find((c) => c.accessKeyId === accessKeyId);
  if (!cred) throw new AwsError('UnrecognizedClientException', 'The security token included in the request is invalid.');
  const token = headers['x-amz-security-token'];
  if (cred.sessionToken !== undefined && token !== cred.sessionToken) {
    throw new AwsError('UnrecognizedClientException', 'The security token included in the request is invalid.');
  }
  if (service !== SERVICE) {
    throw new AwsError('InvalidSignatureException', `Credential should be scoped to correct service: '${SERVICE}'. `);
  }
  if (!/^[a-z]{2}(-gov)?-[a-z]+-\d+$/.test(region)) {
    throw new AwsError('InvalidSignatureException', `Credential should be scoped to a valid region. `);
  }
  const signed = parts.SignedHeaders.split(';');
  if (!signed.includes('host')) {
    throw new AwsError('InvalidSignatureException', "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.");
  }
  const date = amzDate(headers['x-amz-date']);
  if (!date) {
    throw new AwsError('IncompleteSignatureException',
      `Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. Authorization=${auth}`);
  }
  if (!signed.includes('x-amz-date')) {
    throw new AwsError('InvalidSignatureException', "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.");
  }
  if (headers['x-amz-date'].slice(0, 8) !== shortDate) {
    throw new AwsError('InvalidSignatureException',
      `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${shortDate}' != '${headers['x-amz-date'].slice(0, 8)}', from '${headers['x-amz-date']}'.`);
  }
  if (date.getTime() < now - SKEW_MS) {
    throw new AwsError('InvalidSignatureException',
      `Signature expired: ${headers['x-amz-date']} is now earlier than ${fmt(new Date(now - SKEW_MS))} (${fmt(new Date(now))} - 5 min.)`);
  }
  if (date.getTime() > now + SKEW_MS) {
    throw new AwsError('InvalidSignatureException',
      `Signature not yet current: ${headers['x-amz-date']} is still later than ${fmt(new Date(now + SKEW_MS))} (${fmt(new Date(now))} + 5 min.)`);
  }
  const bodyHash = sha256hex(body);
  if (headers['x-amz-content-sha256'] !== undefined && headers['x-amz-content-sha256'] !== bodyHash) {
    throw new AwsError('InvalidSignatureException', "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }

  // Sign the received request again: only the headers the caller signed, its date, its scope.
  const toSign = {};
  for (const name of signed) {
    if (name === 'x-amz-date' || name === 'authorization') continue;
    if (headers[name] === undefined) {
      throw new AwsError('InvalidSignatureException',
        `The request signature we calculated does not match the signature you provided. Signed header '${name}' is missing from the request.`);
    }
    toSign[name] = headers[name];
  }
  const q = req.url.indexOf('?');
  const request = {
    method: req.method,
    protocol: 'http:',
    hostname: headers.host,
    path: q < 0 ? req.url : req.url.slice(0, q),
    query: parseQuery(q < 0 ? '' : req.url.slice(q + 1)),
    headers: toSign,
    body,
  };
  const signedToken = signed.includes('x-amz-security-token') ? token : undefined;
  const signer = new SignatureV4({
    credentials: { accessKeyId, secretAccessKey: cred.secretAccessKey, sessionToken: signedToken },
    region,
    service: SERVICE,
    sha256: Sha256,
    uriEscapePath: true,
    applyChecksum: false,
  });
  const out = await signer.signRequest(request, { signingDate: date, signableHeaders: new Set(signed) });
  const expected = /Signature=([0-9a-f]+)/.exec(out.headers.authorization)[1];
  const expectedList = /SignedHeaders=([^,]+)/.exec(out.headers.authorization)[1];
  const got = Buffer.from(parts.Signature);
  const want = Buffer.from(expected);
  if (expectedList !== parts.SignedHeaders || got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
    const canonicalHeaders = {};
    for (const name of signed) if (name in out.headers) canonicalHeaders[name] = String(out.headers[name]).replace(/[\r\n]/g, ' ').replace(/[ \t]+/g, ' ').replace(/^ | $/g, '');
    const creq = signer.createCanonicalRequest({ ...request, headers: out.headers }, canonicalHeaders,
      headers['x-amz-content-sha256'] || bodyHash);
    const sts = await signer.createStringToSign(fmt(date), `${shortDate}/${region}/${SERVICE}/aws4_request`, creq, 'AWS4-HMAC-SHA256');
    throw new AwsError('InvalidSignatureException',
      'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.'
      + `\n\nThe Canonical String for this request should have been\n'${creq}'\n\nThe String-to-Sign should have been\n'${sts}'\n`);
  }
  const unsigned = Object.keys(headers).filter((h) => !signed.includes(h) && h !== 'authorization');
  return { accessKeyId, region, signedHeaders: signed, unsignedHeaders: unsigned, sessionToken: token };
}
