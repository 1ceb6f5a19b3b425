// bench/bedrock_roundtrip.mjs: the official AWS SDK's side of bench/bedrock_roundtrip.lua.
// usage: node bench/bedrock_roundtrip.mjs <base-url>
// Starts one code-interpreter session against the AgentCore emulator, then for every "go" line on
// stdin runs one executeCode and answers one JSON line {ms, ok}; at EOF stops the session and exits.
// Prints {"ready":true, version} once the session is up.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true'; // node 20 here: the SDK's notice about 2027
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(path.join(root, 'spec', 'package.json'));
const {
  BedrockAgentCoreClient, StartCodeInterpreterSessionCommand, InvokeCodeInterpreterCommand, StopCodeInterpreterSessionCommand,
} = require('@aws-sdk/client-bedrock-agentcore');

const [base] = process.argv.slice(2);
const CODE = process.env.BENCH_CODE || 'print(1)';
const ID = 'aws.codeinterpreter.v1';
const client = new BedrockAgentCoreClient({
  region: 'us-west-2', endpoint: base,
  credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' },
});
const s = await client.send(new StartCodeInterpreterSessionCommand({ codeInterpreterIdentifier: ID, sessionTimeoutSeconds: 900 }));
process.stdout.write(JSON.stringify({ ready: true, version: require('@aws-sdk/client-bedrock-agentcore/package.json').version }) + '\n');

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() !== 'go') continue;
  const t0 = performance.now();
  const r = await client.send(new InvokeCodeInterpreterCommand({
    codeInterpreterIdentifier: ID, sessionId: s.sessionId, name: 'executeCode', arguments: { code: CODE, language: 'python' },
  }));
  let result;
  for await (const ev of r.stream) if (ev.result && !result) result = ev.result;
  const ms = performance.now() - t0;
  process.stdout.write(JSON.stringify({ ms, ok: !!result && !result.isError && result.structuredContent?.stdout === '1\n' }) + '\n');
}
await client.send(new StopCodeInterpreterSessionCommand({ codeInterpreterIdentifier: ID, sessionId: s.sessionId }));
