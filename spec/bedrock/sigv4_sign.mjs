// Signs requests with AWS's own signer (@smithy/signature-v4) for the SigV4 differential spec
// (spec/bedrock/sigv4_differential_spec.lua). stdin: a JSON array of
//   {method, hostname, path, query: {key: value | [values]}, headers: {name: value}, body_b64,
//    region, service, time (epoch seconds), apply_checksum, creds: {accessKeyId, secretAccessKey, sessionToken?}}
// stdout: a JSON array of {authorization, headers} in the same order.
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@aws-crypto/sha256-js';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const reqs = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const out = [];
for (const r of reqs) {
  const signer = new SignatureV4({
    credentials: r.creds, region: r.region, service: r.service, sha256: Sha256,
    uriEscapePath: true, applyChecksum: r.apply_checksum,
  });
  const body = r.body_b64 === '' ? undefined : new Uint8Array(Buffer.from(r.body_b64, 'base64'));
  const signed = await signer.sign({
    method: r.method, protocol: 'https:', hostname: r.hostname, path: r.path, query: r.query, headers: r.headers, body,
  }, { signingDate: new Date(r.time * 1000) });
  out.push({ authorization: signed.headers.authorization });
}
process.stdout.write(JSON.stringify(out));
