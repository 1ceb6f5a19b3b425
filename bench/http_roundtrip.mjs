// bench/http_roundtrip.mjs: the reference side of bench/http_roundtrip.lua: N sequential GETs with
// Node's fetch (undici, keep-alive) against the same loopback server. Prints one JSON line.
const [url, n] = [process.argv[2], Number(process.argv[3] || 500)];
const samples = [];
for (let i = 0; i < n + 20; i++) {
  const t0 = process.hrtime.bigint();
  const res = await fetch(url);
  await res.text();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (i >= 20) samples.push(ms);
}
console.log(JSON.stringify({ samples }));
