// The in-container JavaScript driver: the main process of every Node sandbox.
//
// Same wire protocol as python_driver.py (see sandbox/protocol.py): JSON
// requests, one per line, on stdin; frames `kind | u32 BE length | payload` on
// stdout. Unlike the Python driver, the code runs in a child `node` process
// per call (reading its program from stdin, so `require` resolves from the
// work directory and the program's own stdin is already at EOF): a busy loop
// in the code can then never stall the relay, and JavaScript has no
// interpreter state to keep. After each call every other process in the
// container is killed, so nothing the code started outlives its call.
'use strict';

const fs = require('fs');
const path = require('path');
const childProcess = require('child_process');

const WORK_DIR = '/work';
const OUT_DIR = '/work/out';
const CHUNK = 65536;
const sleeper = new Int32Array(new SharedArrayBuffer(4));

function sleepMs(ms) {
  Atomics.wait(sleeper, 0, 0, ms);
}

function writeAll(buf) {
  let offset = 0;
  while (offset < buf.length) {
    try {
      offset += fs.writeSync(1, buf, offset, buf.length - offset);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
      sleepMs(1);
    }
  }
}

function send(kind, payload) {
  const header = Buffer.alloc(5);
  header.write(kind, 0, 'latin1');
  header.writeUInt32BE(payload.length, 1);
  writeAll(Buffer.concat([header, payload]));
}

let pending = Buffer.alloc(0);

function readLine() {
  const chunk = Buffer.alloc(CHUNK);
  for (;;) {
    const newline = pending.indexOf(10);
    if (newline >= 0) {
      const line = pending.subarray(0, newline).toString('utf8');
      pending = pending.subarray(newline + 1);
      return line;
    }
    let count;
    try {
      count = fs.readSync(0, chunk, 0, CHUNK, null);
    } catch (err) {
      if (err.code === 'EAGAIN') {
        sleepMs(1);
        continue;
      }
      if (err.code === 'EOF') return null;
      throw err;
    }
    if (count === 0) return null;
    pending = Buffer.concat([pending, chunk.subarray(0, count)]);
  }
}

function oomKills() {
  for (const file of ['/sys/fs/cgroup/memory/memory.oom_control', '/sys/fs/cgroup/memory.events']) {
    try {
      const match = /^oom_kill (\d+)$/m.exec(fs.readFileSync(file, 'utf8'));
      if (match) return Number(match[1]);
    } catch (err) {
      // not this cgroup version
    }
  }
  return 0;
}

function writeFiles(files) {
  for (const [rel, text] of Object.entries(files || {})) {
    const full = path.join(WORK_DIR, rel);
    fs.mkdirSync(path.dirname(full), { recursive: true });
    fs.writeFileSync(full, text, 'utf8');
  }
}

function killStrays() {
  // kill(-1) reaches every process but init and ourselves; a fork bomb may
  // refill the table while we sweep, so sweep until nothing is left (bounded).
  for (let i = 0; i < 500; i++) {
    try {
      process.kill(-1, 'SIGKILL');
    } catch (err) {
      return;
    }
    sleepMs(2);
  }
}

const MEDIA_TYPES = {
  '.txt': 'text/plain', '.csv': 'text/csv', '.html': 'text/html', '.md': 'text/markdown',
  '.json': 'application/json', '.js': 'text/javascript', '.svg': 'image/svg+xml',
  '.xml': 'text/xml', '.py': 'text/x-python', '.png': 'image/png', '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp', '.pdf': 'application/pdf',
};

// One `a` frame: u16 header length, JSON header, the raw bytes. The host sniffs
// images, decodes text and checks every size itself.
// The host refuses artifact headers over 2048 bytes.
const MAX_HEADER = 2000;

function artifactHeader(rel) {
  const mediaType = MEDIA_TYPES[path.extname(rel).toLowerCase()] || 'application/octet-stream';
  const header = Buffer.from(JSON.stringify({ path: rel, media_type: mediaType }), 'utf8');
  return header.length <= MAX_HEADER ? header : null;
}

function sendArtifact(header, data) {
  const length = Buffer.alloc(2);
  length.writeUInt16BE(header.length, 0);
  send('a', Buffer.concat([length, header, data]));
}

// At most MAX_NOTICES notices, then one line counting the rest: 100,000 refused
// files must not make a 100,000-line result.
const MAX_NOTICES = 40;

function makeNotices() {
  const list = [];
  let dropped = 0;
  return {
    push(notice) {
      if (list.length < MAX_NOTICES) list.push(notice.slice(0, 500));
      else dropped += 1;
    },
    final() {
      return dropped ? list.concat([`... and ${dropped} more notices`]) : list;
    },
  };
}

function readRegular(full, cap) {
  let fd;
  try {
    const c = fs.constants;
    fd = fs.openSync(full, c.O_RDONLY | c.O_NOFOLLOW | c.O_NONBLOCK);
  } catch (err) {
    return null;
  }
  try {
    if (!fs.fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(cap + 1);
    let total = 0;
    while (total < cap + 1) {
      const n = fs.readSync(fd, buf, total, cap + 1 - total, null);
      if (n === 0) break;
      total += n;
    }
    return buf.subarray(0, total);
  } finally {
    fs.closeSync(fd);
  }
}

const seen = new Map();

function collect(limits) {
  let count = 0;
  const notices = makeNotices();
  let total = 0;
  let top;
  try {
    top = fs.lstatSync(OUT_DIR);
  } catch (err) {
    return notices;
  }
  if (!top.isDirectory()) {
    notices.push('out: the output directory is not a plain directory; ignored');
    return notices;
  }
  const walk = (dir) => {
    let names;
    try {
      names = fs.readdirSync(dir, { encoding: 'buffer' });
    } catch (err) {
      notices.push(`out/${path.relative(OUT_DIR, dir)}: cannot be read (${err.code}); skipped`);
      return;
    }
    const decoder = new TextDecoder('utf-8', { fatal: true });
    for (const raw of names.sort(Buffer.compare)) {
      let name;
      try {
        name = decoder.decode(raw);
      } catch (err) {
        notices.push(`out/${path.relative(OUT_DIR, dir)}/${JSON.stringify(raw.toString('latin1')).slice(1, -1)}: the name is not valid UTF-8; refused`);
        continue;
      }
      const full = path.join(dir, name);
      const rel = path.relative(OUT_DIR, full);
      let info;
      try {
        info = fs.lstatSync(full);
      } catch (err) {
        continue;
      }
      if (info.isSymbolicLink()) {
        notices.push(`out/${rel}: a symbolic link; refused`);
        continue;
      }
      if (info.isDirectory()) {
        walk(full);
        continue;
      }
      if (!info.isFile()) {
        notices.push(`out/${rel}: not a regular file; refused`);
        continue;
      }
      const header = artifactHeader(rel);
      if (header === null) {
        notices.push(`out/${rel.slice(0, 100)}...: the path is too long; not returned`);
        continue;
      }
      const signature = `${info.mtimeMs}:${info.size}:${info.ino}`;
      if (seen.get(rel) === signature) continue;
      seen.set(rel, signature);
      if (count >= limits.max_artifacts) {
        notices.push(`out/${rel}: more than ${limits.max_artifacts} artifacts; not returned`);
        continue;
      }
      if (info.size > limits.artifact_bytes) {
        notices.push(`out/${rel}: ${info.size} bytes exceeds the ${limits.artifact_bytes}-byte artifact limit; not returned`);
        continue;
      }
      if (total + info.size > limits.artifacts_total_bytes) {
        notices.push(`out/${rel}: artifacts would exceed ${limits.artifacts_total_bytes} bytes in total; not returned`);
        continue;
      }
      const data = readRegular(full, limits.artifact_bytes);
      if (data === null || data.length > limits.artifact_bytes) {
        notices.push(`out/${rel}: changed while being read; not returned`);
        continue;
      }
      total += data.length;
      count += 1;
      sendArtifact(header, data);
    }
  };
  walk(OUT_DIR);
  return notices;
}

function memoryLimitMb() {
  for (const file of ['/sys/fs/cgroup/memory/memory.limit_in_bytes', '/sys/fs/cgroup/memory.max']) {
    try {
      const bytes = Number(fs.readFileSync(file, 'utf8').trim());
      if (Number.isFinite(bytes) && bytes > 0) return Math.floor(bytes / 1048576);
    } catch (err) {
      // not this cgroup version
    }
  }
  return 256;
}

// A child is started ahead of the call that will use it (node takes ~100 ms to
// boot): `node -` boots, then waits for its program on stdin.
const HEAP_MB = Math.max(16, Math.floor(Math.min(memoryLimitMb(), 65536) * 0.75));
let spare = null;

function spawnChild(esm) {
  const args = [`--max-old-space-size=${HEAP_MB}`];
  if (esm) args.push('--input-type=module');
  args.push('-');
  const child = childProcess.spawn(process.execPath, args, {
    cwd: WORK_DIR,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.on('error', () => {});
  return child;
}

function prepareSpare() {
  spare = spawnChild(false);
  spare.on('error', () => {});
}

function takeChild(esm) {
  const ready = spare !== null && spare.exitCode === null && spare.signalCode === null;
  const child = !esm && ready ? spare : spawnChild(esm);
  if (spare !== null && child !== spare) spare.kill('SIGKILL');
  spare = null;
  return child;
}

// Small writes (console.log in a loop) are coalesced into fuller frames until the
// next turn of the loop: the host counts every frame's header against the call's budget.
function relay(stream, kind) {
  let parts = [];
  let size = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (size === 0) return;
    const data = Buffer.concat(parts, size);
    parts = [];
    size = 0;
    for (let offset = 0; offset < data.length; offset += CHUNK) {
      send(kind, data.subarray(offset, offset + CHUNK));
    }
  };
  stream.on('data', (chunk) => {
    parts.push(chunk);
    size += chunk.length;
    if (size >= CHUNK) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
  return flush;
}

function runCall(request, next) {
  const oomBefore = oomKills();
  try {
    // The code of an earlier call may have put a directory where a file goes.
    writeFiles(request.files);
    fs.mkdirSync(OUT_DIR, { recursive: true });
  } catch (err) {
    send('e', Buffer.from(`cannot write the input files: ${err.message}\n`));
    const done = { call: request.call, exit_code: 1, value: null, oom: false, signal: null, notices: [] };
    send('d', Buffer.from(JSON.stringify(done), 'utf8'));
    setImmediate(next);
    return;
  }
  const child = takeChild(/^\s*(import|export)\s/m.test(request.code));
  const flushers = [relay(child.stdout, 'o'), relay(child.stderr, 'e')];
  child.stdin.end(request.code);
  let exitCode = null;
  let killedBy = null;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    for (const flush of flushers) flush();
    const notices = collect(request.limits).final();
    const done = {
      call: request.call, exit_code: exitCode, value: null, oom: oomKills() > oomBefore,
      signal: killedBy, notices,
    };
    send('d', Buffer.from(JSON.stringify(done), 'utf8'));
    prepareSpare();
    setImmediate(next);
  };
  child.on('error', (err) => {
    send('e', Buffer.from(`cannot start node: ${err.message}\n`));
    exitCode = 127;
    finish();
  });
  child.on('exit', (code, signal) => {
    exitCode = code !== null ? code : 128 + (require('os').constants.signals[signal] || 0);
    killedBy = signal;
    killStrays();
    // Let the relays drain what the code wrote; the sweep closed every other writer.
    child.on('close', finish);
    setTimeout(finish, 5000).unref();
  });
}

function loop() {
  const line = readLine();
  if (line === null) process.exit(0);
  runCall(JSON.parse(line), loop);
}

fs.mkdirSync(WORK_DIR, { recursive: true });
process.chdir(WORK_DIR);
prepareSpare();
send('R', Buffer.from(JSON.stringify({ pid: process.pid })));
loop();
