// A loopback stand-in for the two AWS credential endpoints glsb.aws.credentials reads, for
// spec/bedrock/credentials_spec.lua (tests only):
//   * ECS/EKS container credentials: GET <any path> with the configured Authorization token
//     (403 without it) -> {AccessKeyId, SecretAccessKey, Token, Expiration, RoleArn}
//   * EC2 instance metadata, IMDSv2: PUT /latest/api/token (needs
//     X-aws-ec2-metadata-token-ttl-seconds) -> a token; GET /latest/meta-data/iam/security-credentials/
//     and .../<role> need X-aws-ec2-metadata-token (401 without) -> the role, its credentials
// Every answer hands out a new generation of credentials (ASIA...<n>), valid for `ttl` seconds.
//   node metadata_server.mjs [--token TOKEN] [--ttl SECONDS]   first line: "listening <url>"
// Admin: GET /_admin -> {requests: [{method, path, authorization, imdsToken, ttlHeader}], issued}
//        POST /_admin {ttl, fail} (fail: an HTTP status every credentials answer gets from now on)
import http from 'node:http';
import crypto from 'node:crypto';

const args = process.argv.slice(2);
let authToken = null;
let ttl = 3600;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--token') authToken = args[++i];
  else if (args[i] === '--ttl') ttl = Number(args[++i]);
}
const ROLE = 'glsb-test-role';
const imdsTokens = new Set();
const requests = [];
let issued = 0;
let failStatus = 0;

function creds() {
  issued++;
  return {
    AccessKeyId: `ASIAGLSBTEST${String(issued).padStart(6, '0')}`,
    SecretAccessKey: `glsbSecret${issued}${crypto.randomBytes(8).toString('hex')}`,
    Token: `glsbToken${issued}${crypto.randomBytes(16).toString('base64')}`,
    Expiration: new Date(Date.now() + ttl * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
  };
}

function send(res, status, body, type = 'application/json') {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/_admin') {
      if (req.method === 'POST') {
        const o = JSON.parse(body || '{}');
        if (o.ttl !== undefined) ttl = o.ttl;
        if (o.fail !== undefined) failStatus = o.fail;
        return send(res, 200, '{}');
      }
      return send(res, 200, JSON.stringify({ requests, issued }));
    }
    requests.push({
      method: req.method, path: url.pathname, authorization: req.headers.authorization ?? null,
      imdsToken: req.headers['x-aws-ec2-metadata-token'] ?? null, ttlHeader: req.headers['x-aws-ec2-metadata-token-ttl-seconds'] ?? null,
    });
    if (url.pathname === '/latest/api/token') {
      if (req.method !== 'PUT') return send(res, 403, '', 'text/plain');
      if (!req.headers['x-aws-ec2-metadata-token-ttl-seconds']) return send(res, 400, '', 'text/plain');
      const t = crypto.randomBytes(24).toString('base64');
      imdsTokens.add(t);
      return send(res, 200, t, 'text/plain');
    }
    if (url.pathname.startsWith('/latest/meta-data/')) {
      if (!imdsTokens.has(req.headers['x-aws-ec2-metadata-token'])) return send(res, 401, '', 'text/plain');
      if (url.pathname === '/latest/meta-data/iam/security-credentials/') return send(res, 200, ROLE, 'text/plain');
      if (url.pathname === `/latest/meta-data/iam/security-credentials/${ROLE}`) {
        if (failStatus) return send(res, failStatus, '', 'text/plain');
        return send(res, 200, JSON.stringify({ Code: 'Success', LastUpdated: new Date().toISOString(), Type: 'AWS-HMAC', ...creds() }));
      }
      return send(res, 404, '', 'text/plain');
    }
    // container credentials
    if (authToken !== null && req.headers.authorization !== authToken) return send(res, 403, JSON.stringify({ message: 'forbidden' }));
    if (failStatus) return send(res, failStatus, '{}');
    return send(res, 200, JSON.stringify({ RoleArn: `arn:aws:iam::123456789012:role/${ROLE}`, ...creds() }));
  });
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening http://127.0.0.1:${server.address().port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
