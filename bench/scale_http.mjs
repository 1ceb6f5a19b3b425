// bench/scale_http.mjs: the two Node sides of bench/scale_http.lua.
//   node bench/scale_http.mjs server          a loopback server that holds every request and answers the
//                                             oldest one each millisecond (so all in flight wait together,
//                                             and one becomes ready at a time); prints "listening <url>"
//   node bench/scale_http.mjs client URL N C  Node fetch (undici) making N requests, C in flight at a time;
//                                             prints one JSON line {ok, wall_ms, cpu_ms, peak_rss_kb}
import http from 'node:http';
import { performance } from 'node:perf_hooks';

const [mode, url, n, c] = process.argv.slice(2);

if (mode === 'server') {
  const held = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => held.push(res));
  });
  server.keepAliveTimeout = 60000;
  server.listen(0, '127.0.0.1', 2048, () => {
    process.stdout.write(`listening http://127.0.0.1:${server.address().port}\n`);
  });
  setInterval(() => {
    const res = held.shift();
    if (res) { res.writeHead(200); res.end('x'); }
  }, 1);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
} else if (mode === 'client') {
  const total = Number(n);
  let next = 0;
  let ok = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Number(c) }, async () => {
    while (next < total) {
      next++;
      try {
        const r = await fetch(url);
        if (r.status === 200 && (await r.text()) === 'x') ok++;
      } catch {
        // counted as not ok
      }
    }
  }));
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(JSON.stringify({ ok, wall_ms: performance.now() - t0, cpu_ms: (cpu.user + cpu.system) / 1000,
    peak_rss_kb: process.resourceUsage().maxRSS }) + '\n');
}
