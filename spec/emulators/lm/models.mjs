// The emulated models (tests only). Both wire formats turn a request into one neutral conversation:
//
//   conv = { model, system, tools: [{name, description, parameters}], toolChoice ('auto'|'none'|'required'|
//            {name}|undefined), maxTokens, messages: [{role: 'user'|'assistant'|'tool', text, images:
//            [{media_type, data (base64)}], tool_calls: [{id, name, arguments}], tool_call_id, is_error}] }
//
// and a model answers it with one neutral reply, which the wire module renders:
//
//   reply = { text, tool_calls: [{name, arguments | arguments_raw, id?}], finish?: 'stop'|'length'|
//             'tool_calls'|'content_filter'|'refusal'|'pause', usage?: {input_tokens, output_tokens},
//             no_usage?, ...stream controls (see the README) }
//
// Two kinds of model: a script (a test's own sequence of replies, emulator.mjs Scripts) and "glsb-rules",
// a small rule-driven model that writes real Python for a few simple tasks, reads what the code printed,
// fixes one kind of failure, and answers. It is what examples/interpreter.lua runs against.

export const RULES_MODEL = 'glsb-rules';

// The tool a code-writing model calls: one named execute_code, else the first with a string `code`.
function pickTool(tools) {
  const byName = tools.find((t) => t.name === 'execute_code');
  if (byName) return byName;
  return tools.find((t) => t.parameters && t.parameters.properties && t.parameters.properties.code) || tools[0] || null;
}

function pngSize(b64) {
  try {
    const buf = Buffer.from(b64, 'base64');
    if (buf.length < 24 || buf.readUInt32BE(0) !== 0x89504e47) return null;
    return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
  } catch {
    return null;
  }
}

const FENCE = /```(?:python|py)?\s*\n([\s\S]*?)```/;

// Where the current task starts: the last user message that is neither a tool result nor the answer to
// a step (a user message right after tool results carries their images; one right after an assistant
// message with a code fence carries the fence's output).
function taskIndex(msgs) {
  for (let i = msgs.length - 1; i >= 0; i--) {
    const m = msgs[i];
    if (m.role !== 'user') continue;
    const prev = msgs[i - 1];
    if (prev && prev.role === 'tool') continue;
    if (prev && prev.role === 'assistant' && FENCE.test(prev.text || '')) continue;
    return i;
  }
  return -1;
}

function pyList(nums) {
  return '[' + nums.join(', ') + ']';
}

// A bar chart of the counts, as a PNG made with nothing but zlib: the fallback when matplotlib is missing.
function purePngHistogram(nums, file) {
  return [
    'import struct, zlib',
    `data = ${pyList(nums)}`,
    'values = sorted(set(data))',
    'counts = [data.count(v) for v in values]',
    'W, H = 320, 240',
    'rows = []',
    'bar = W // max(1, len(values))',
    'for y in range(H):',
    '    row = bytearray(b"\\x00")',
    '    for x in range(W):',
    '        i = min(x // bar, len(values) - 1)',
    '        filled = (H - y) <= counts[i] * (H - 20) // max(counts) and x % bar != 0',
    '        row += bytes((40, 90, 200) if filled else (255, 255, 255))',
    '    rows.append(bytes(row))',
    'def chunk(kind, payload):',
    '    c = kind + payload',
    '    return struct.pack(">I", len(payload)) + c + struct.pack(">I", zlib.crc32(c) & 0xffffffff)',
    'png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))',
    'png += chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")',
    `with open(${JSON.stringify(file)}, "wb") as f:`,
    '    f.write(png)',
    `print("saved ${file}: counts", dict(zip(values, counts)))`,
  ].join('\n');
}

// The tasks the rule model knows: match(task) -> a plan {code, fix(obsText, attempt) -> code|null,
// answer(obsText, images) -> text}, or null.
const PLANS = [
  function histogram(task) {
    const m = /histogram of \[([^\]]*)\]/i.exec(task);
    if (!m) return null;
    const nums = m[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number).filter((n) => Number.isFinite(n));
    if (nums.length === 0) return null;
    const f = /sav\w*(?:\s+it)?\s+(?:as|to)\s+['"`]?([\w./-]+\.png)/i.exec(task);
    const file = f ? f[1] : 'hist.png';
    const code = [
      'import matplotlib.pyplot as plt',
      `data = ${pyList(nums)}`,
      'fig, ax = plt.subplots()',
      'ax.hist(data, bins=len(set(data)), edgecolor="black")',
      'ax.set_title("Histogram")',
      'ax.set_xlabel("value")',
      'ax.set_ylabel("count")',
      `fig.savefig(${JSON.stringify(file)})`,
      'plt.show()',
      `print("saved ${file}")`,
    ].join('\n');
    return {
      code,
      fix(obs) {
        if (/No module named ['"]?matplotlib/.test(obs)) return purePngHistogram(nums, file);
        return null;
      },
      answer(obs, images) {
        let s = `I plotted a histogram of the ${nums.length} values ${pyList(nums)} and saved it as ${file}.`;
        const seen = images.map((im) => pngSize(im.data)).filter(Boolean);
        if (seen.length) s += ` The chart I was shown is ${seen[0].width}x${seen[0].height} pixels.`;
        return s;
      },
    };
  },
  function arithmetic(task) {
    const m = /(?:what is|compute|calculate|evaluate)\s+([0-9+\-*/().%\s]*[0-9)])/i.exec(task);
    if (!m) return null;
    const expr = m[1].trim();
    return {
      code: `result = ${expr}\nprint(result)`,
      fix: () => null,
      answer: (obs) => `${expr} = ${lastLine(obs)}.`,
    };
  },
  function columnMean(task) {
    const m = /mean of (?:the )?(?:column )?['"`]?(\w+)['"`]?(?: column)? (?:in|of) ['"`]?([\w./-]+\.csv)/i.exec(task);
    if (!m) return null;
    const [, col, file] = m;
    return {
      code: [
        'import csv, statistics',
        `with open(${JSON.stringify(file)}, newline="") as f:`,
        `    values = [float(row[${JSON.stringify(col)}]) for row in csv.DictReader(f)]`,
        'print(statistics.mean(values))',
      ].join('\n'),
      fix: () => null,
      answer: (obs) => `The mean of ${col} in ${file} is ${lastLine(obs)}.`,
    };
  },
  function writeFile(task) {
    const m = /write ['"](.+?)['"] (?:in)?to (?:a file )?(?:named |called )?['"`]?([\w./-]+)['"`]?/i.exec(task);
    if (!m) return null;
    const [, text, file] = m;
    return {
      code: `with open(${JSON.stringify(file)}, "w") as f:\n    n = f.write(${JSON.stringify(text)})\nprint(n, "characters written")`,
      fix: () => null,
      answer: () => `I wrote ${JSON.stringify(text)} to ${file}.`,
    };
  },
  function listDir(task) {
    const m = /list the files in ['"`]?([\w./-]+)/i.exec(task);
    if (!m) return null;
    return {
      code: `import os\nfor name in sorted(os.listdir(${JSON.stringify(m[1])})):\n    print(name)`,
      fix: () => null,
      answer: (obs) => `The files in ${m[1]}: ${obs.trim().split('\n').filter(Boolean).join(', ') || 'none'}.`,
    };
  },
];

function lastLine(text) {
  const lines = String(text || '').trim().split('\n').map((l) => l.trim()).filter(Boolean);
  // the interpreter may label its parts ("stdout:"); the value is the last plain line
  for (let i = lines.length - 1; i >= 0; i--) if (!/^[\w ]+:$/.test(lines[i]) && !/^\[/.test(lines[i])) return lines[i];
  return lines[lines.length - 1] || '';
}

const FAILED = /Traceback \(most recent call last\)|^\s*(?:Error|error)\b|\b\w+(?:Error|Exception): /m;

export const HELP = 'I am glsb-rules, a small rule-driven test model. I can plot a histogram of [numbers] and save it '
  + 'as NAME.png, compute an arithmetic expression, give the mean of a column in a CSV file, write \'text\' to a '
  + 'file, or list the files in a directory.';

function say(text) { return { text, tool_calls: [] }; }

function act(tool, code) {
  if (!tool) return say('```python\n' + code + '\n```');
  return { text: '', tool_calls: [{ name: tool.name, arguments: { code } }] };
}

// rulesReply(conv) -> reply
export function rulesReply(conv) {
  const msgs = conv.messages;
  const t = taskIndex(msgs);
  if (t < 0) return say(HELP);
  const plan = PLANS.reduce((found, p) => found || p(msgs[t].text || ''), null);
  const fenced = conv.tools.length === 0 && conv.toolChoice === undefined;
  const tool = fenced ? null : pickTool(conv.tools);
  const after = msgs.slice(t + 1);
  const steps = after.filter((m) => m.role === 'assistant').length;
  const images = after.flatMap((m) => m.images || []);
  // the last observation: the last tool result, or (fenced mode) the user message after a fence
  const last = [...after].reverse().find((m) => m.role === 'tool' || m.role === 'user');
  const obs = last ? (last.text || '') : '';
  const failed = last ? (last.is_error === true || FAILED.test(obs)) : false;

  if (conv.toolChoice === 'none' || (!fenced && !tool)) {
    if (!plan) return say(HELP);
    if (steps === 0) return say('I did not get to run any code for this task.');
    return say(failed ? `I could not finish: the last run failed (${firstErrorLine(obs)}).` : plan.answer(obs, images));
  }
  if (!plan) return say(HELP);
  if (steps === 0) return act(tool, plan.code);
  if (failed) {
    const fixed = steps < 3 ? plan.fix(obs, steps) : null;
    if (fixed) return act(tool, fixed);
    return say(`The code failed: ${firstErrorLine(obs)}`);
  }
  return say(plan.answer(obs, images));
}

function firstErrorLine(text) {
  const m = /\b\w+(?:Error|Exception): .*/.exec(text);
  return m ? m[0].slice(0, 200) : String(text).trim().split('\n')[0].slice(0, 200);
}

// Text of a reply, for usage and the answer's length.
export function replyText(reply) {
  let s = reply.text || '';
  for (const c of reply.tool_calls || []) s += c.name + (c.arguments_raw ?? JSON.stringify(c.arguments ?? {}));
  return s;
}

// Split s into pieces of at most n characters (never splitting a surrogate pair).
export function pieces(s, n) {
  const out = [];
  const chars = Array.from(s);
  for (let i = 0; i < chars.length; i += n) out.push(chars.slice(i, i + n).join(''));
  return out;
}
