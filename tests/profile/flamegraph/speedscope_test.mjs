// Folded stacks and the Chrome trace (`ptdecode export --format folded`,
// `chrome-trace`) read by a tool that is not ours: speedscope, in headless
// Chromium.
//   node speedscope_test.mjs PTDECODE LIBJPT JAVA SAMPLES_DIR WORKDIR SCREENSHOT.png
// Records Branchy with -Xint in the agent's reference mode, exports its folded
// stacks by bytecodes, and loads them into speedscope as its command line does
// (index.html#localProfilePath=FILE.js). Checks that speedscope imports them
// as collapsed stacks without an error, and that its sandwich table (self and
// total per method) holds, for each row it shows, what the folded lines sum to
// and what `ptdecode hot` reports (exclusive bytecodes, and inclusive ones
// with a recursive activation counted once, as a flame graph counts a frame
// once per stack). Saves the flame graph as SCREENSHOT.png. Then the Chrome
// trace and the speedscope (evented) export: speedscope imports each with no
// frame it cannot close or leaves open, and its sandwich rows of the main
// thread hold the times `ptdecode hot` gives with the same TSC frequency
// (speedscope shows 4 digits: within 0.5%). Then the pprof export: speedscope reads it as pprof,
// and its sandwich rows (bytecodes, the default sample type) are hot's; and,
// with Debian's golang-go installed, `go tool pprof -top` lists hot's top 10
// by bytecodes (flat and cumulative) and by calls.
// Needs chromium (CHROMIUM=path, default /usr/bin/chromium) and `npm ci` in
// this folder (playwright-core, speedscope). Exits 77 (skipped) without them.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
const ROWS = 10;  // sandwich rows compared (the table is virtualized: the top ones are drawn)

const [ptdecode, libjpt, java, samples, work, shot] = process.argv.slice(2);
if (!shot) {
  console.error('usage: node speedscope_test.mjs PTDECODE LIBJPT JAVA SAMPLES_DIR WORKDIR SCREENSHOT.png');
  process.exit(2);
}
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  console.log('SKIP: playwright-core is not installed (run npm ci in tests/profile/flamegraph)');
  process.exit(77);
}
const app = join(here, 'node_modules', 'speedscope', 'dist', 'release', 'index.html');
if (!existsSync(app)) {
  console.log('SKIP: speedscope is not installed (run npm ci in tests/profile/flamegraph)');
  process.exit(77);
}
const exe = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(exe)) {
  console.log('SKIP: no chromium at ' + exe);
  process.exit(77);
}

let failures = 0;
const PRIM = { B: 'byte', C: 'char', D: 'double', F: 'float', I: 'int', J: 'long', S: 'short',
               Z: 'boolean', V: 'void' };
// A cct-json method as ptdecode names it: pkg.Cls.name(Type, ...).
function hotName(m) {
  const out = [];
  const sig = m.sig || '';
  let i = 1;
  while (i < sig.length && sig[i] !== ')') {
    let dims = 0;
    while (sig[i] === '[') { dims++; i++; }
    let t;
    if (sig[i] === 'L') {
      const e = sig.indexOf(';', i);
      t = sig.slice(i + 1, e).replace(/\//g, '.');
      i = e + 1;
    } else {
      t = PRIM[sig[i]];
      i++;
    }
    out.push(t + '[]'.repeat(dims));
  }
  return m.class.replace(/\//g, '.') + '.' + m.name + '(' + out.join(', ') + ')';
}
// The sandwich view's table: "TOTAL (pct)", "SELF (pct)", name, row by row,
// sorted by self, heaviest first; value() reads a cell without its share.
async function sandwich(page, value) {
  await page.getByText('Sandwich').click();
  await page.getByText('Symbol Name').waitFor();
  const text = await page.evaluate(() => document.body.innerText);
  const cells = text.slice(text.indexOf('Symbol Name') + 'Symbol Name'.length)
    .split('\n').map((s) => s.trim()).filter((s) => s);
  const cell = (s) => value(s.replace(/\s*\(.*\)$/, ''));
  const rows = [];
  for (let i = 0; i + 2 < cells.length && rows.length < ROWS; i += 3)
    rows.push({ total: cell(cells[i]), self: cell(cells[i + 1]), name: cells[i + 2] });
  return rows;
}
function check(cond, what, detail) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what + (detail !== undefined ? ': ' + detail : ''));
  if (!cond) failures++;
}
function run(cmd, args) {
  console.log('$ ' + [cmd, ...args].join(' '));
  return execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28,
                                   stdio: ['ignore', 'pipe', 'inherit'] });
}

// ------------------------------------------------------------- the profile
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'classes'), { recursive: true });
run(join(dirname(java), 'javac'), ['--release', '17', '-d', join(work, 'classes'),
                                   join(samples, 'Branchy.java')]);
const trace = join(work, 'ref.trace');
run(java, [`-agentpath:${libjpt}=mode=reference,out=${trace}`, '-Xint',
           '-cp', join(work, 'classes'), 'Branchy', '5']);
const folded = join(work, 'branchy.folded');
run(ptdecode, ['export', trace, '--format', 'folded', '--by', 'bytecodes', '-o', folded]);
const hot = new Map(JSON.parse(run(ptdecode, ['hot', trace, '-n', '1000000', '--json']))
  .map((m) => [m.method, m]));

// What each frame sums to, read from the folded lines themselves: self is the
// value of the stacks it ends, total that of the stacks it is in (once each).
const self = new Map(), total = new Map();
let lines = 0;
for (const line of readFileSync(folded, 'utf8').split('\n')) {
  if (!line) continue;
  const m = /^(.*) (\d+)$/.exec(line);
  if (!m) {
    check(false, 'a folded line is "stack count"', line);
    continue;
  }
  lines++;
  const frames = m[1].split(';'), v = Number(m[2]);
  const leaf = frames[frames.length - 1];
  self.set(leaf, (self.get(leaf) || 0) + v);
  for (const f of new Set(frames)) total.set(f, (total.get(f) || 0) + v);
}
check(lines > 100, 'folded stacks written', lines + ' lines');

// The Chrome trace, times in ns at 1 GHz (so ticks are nanoseconds), and each
// method's self and total time in the main thread from the CCT, counting a
// recursive method's inner activations once, as hot and speedscope do.
const pprof = join(work, 'branchy.pb.gz');
run(ptdecode, ['export', trace, '--format', 'pprof', '-o', pprof]);
// go tool pprof -top (Debian's golang-go), when installed: the same top
// methods, flat and cumulative, as ptdecode hot, by bytecodes and by calls.
const go = ['/usr/bin/go', '/usr/lib/go/bin/go'].find((g) => existsSync(g));
if (!go) {
  console.log('note: no go tool (Debian package golang-go): go tool pprof not run');
} else {
  const env = { ...process.env, HOME: work, GOCACHE: join(work, 'gocache'), GOFLAGS: '' };
  for (const [by, flat, cum] of [['bytecodes', 'self_bytecodes', 'bytecodes'], ['calls', 'calls', null]]) {
    const top = execFileSync(go, ['tool', 'pprof', '-top', '-nodecount=10', '-sample_index=' + by, pprof],
                             { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'pipe'] });
    const rows = [...top.matchAll(/^ *(\d+) +[\d.]+% +[\d.]+% +(\d+) +[\d.]+% +(.+)$/gm)]
      .map((m) => ({ flat: Number(m[1]), cum: Number(m[2]), name: m[3].trim() }));
    const want = [...hot.values()].sort((a, b) => b[flat] - a[flat]).slice(0, rows.length);
    const agree = rows.length === 10 && rows.every((r, i) => {
      const h = hot.get(r.name);
      return h && r.flat === h[flat] && r.flat === want[i][flat] && (!cum || r.cum === h[cum]);
    });
    check(agree, `go tool pprof -top -sample_index=${by}: hot's top 10`,
          rows.slice(0, 3).map((r) => `${r.name} ${r.flat} ${r.cum}`).join('; '));
  }
}
const chrome = join(work, 'branchy.json');
run(ptdecode, ['export', trace, '--format', 'chrome-trace', '--tsc-hz', '1e9', '-o', chrome]);
const evented = join(work, 'branchy.speedscope.json');
run(ptdecode, ['export', trace, '--format', 'speedscope', '--tsc-hz', '1e9', '-o', evented]);
const cct = JSON.parse(run(ptdecode, ['export', trace, '--format', 'cct-json', '-o', '-']));
const mainTimes = new Map();
{
  const nd = cct.nodes, names = cct.methods.map((m) => hotName(m));
  const main = Object.keys(cct.labels).map(Number).find((k) => /^main \(tid/.test(cct.labels[k]));
  const stack = [], open = new Map();
  for (let i = main + 1; i < nd.parent.length; i++) {
    while (stack.length && stack[stack.length - 1] !== nd.parent[i]) {
      const j = stack.pop();
      open.set(nd.method[j], open.get(nd.method[j]) - 1);
    }
    if (!stack.length && nd.parent[i] !== main) break;     // past main's subtree
    const m = nd.method[i], t = mainTimes.get(names[m]) || { self: 0, total: 0 };
    t.self += nd.self_time[i];
    if (!open.get(m)) t.total += nd.time[i];
    open.set(m, (open.get(m) || 0) + 1);
    mainTimes.set(names[m], t);
    stack.push(i);
  }
}

// ------------------------------------------------------------- speedscope
// As speedscope's command line opens a file: a script that hands the bytes over.
function loaderFor(name, path) {
  const loader = join(work, 'load-' + name + '.js');
  writeFileSync(loader, 'speedscope.loadFileFromBase64(' + JSON.stringify(name) + ', ' +
                JSON.stringify(readFileSync(path).toString('base64')) + ')');
  return loader;
}
const loader = loaderFor('branchy.folded', folded);
const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
         '--disable-background-networking', '--disable-component-update'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const log = [], errors = [], warnings = [];
  page.on('console', (m) => (m.type() === 'error' ? errors : m.type() === 'warning' ? warnings : log)
    .push(m.text()));
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(pathToFileURL(app).href + '#localProfilePath=' + loader, { waitUntil: 'load' });
  await page.waitForFunction(() => document.title.endsWith(' - speedscope'), null, { timeout: 120000 });
  check(log.some((t) => t.includes('Importing as collapsed stack format')),
        'speedscope reads the file as collapsed stacks', log.filter((t) => /import/i.test(t)).join('; '));
  check(errors.length === 0, 'no errors in the page', errors.join('; ') || undefined);
  await page.getByText('Left Heavy').click();
  await page.waitForTimeout(500);
  await page.screenshot({ path: shot });
  console.log('screenshot: ' + shot);

  const rows = await sandwich(page, (s) => Number(s.replace(/,/g, '')));
  check(rows.length === ROWS, 'sandwich rows read', rows.length);

  const selfs = [...self.values()].sort((a, b) => b - a);
  rows.forEach((r, i) => {
    const h = hot.get(r.name);
    const agree = h && r.self === self.get(r.name) && r.total === total.get(r.name) &&
      r.self === h.self_bytecodes && r.total === h.bytecodes && r.self === selfs[i];
    check(agree, `row ${i + 1}: ${r.name}`,
          `speedscope self ${r.self} total ${r.total}; folded ${self.get(r.name)} ${total.get(r.name)}` +
          (h ? `; hot ${h.self_bytecodes} ${h.bytecodes}` : '; not in ptdecode hot') +
          `; rank ${i + 1} by self is ${selfs[i]}`);
  });

  // ------------------------------------------- chrome-trace, speedscope's own
  for (const [file, path, importer] of [['branchy.json', chrome, 'Trace Event Format'],
                                        ['branchy.speedscope.json', evented, 'speedscope json']]) {
    await page.goto('about:blank');     // a new hash alone would not reload speedscope
    log.length = errors.length = warnings.length = 0;
    await page.goto(pathToFileURL(app).href + '#localProfilePath=' + loaderFor(file, path),
                    { waitUntil: 'load', timeout: 300000 });
    await page.waitForFunction(() => document.title.endsWith(' - speedscope'), null, { timeout: 300000 });
    check(log.some((t) => t.includes('Importing as ' + importer)),
          `speedscope reads ${file} as ${importer}`, log.filter((t) => /import/i.test(t)).join('; '));
    const unmatched = warnings.filter((t) => /Tried to end|still open|stack was empty|[Mm]ismatch/.test(t));
    check(unmatched.length === 0 && errors.length === 0, `${file}: every frame opens and closes in order`,
          unmatched.slice(0, 3).join('; ') || errors.join('; ') || undefined);
    const us = { ns: 1e-3, '\u00b5s': 1, ms: 1e3, s: 1e6 };
    const trows = await sandwich(page, (s) => {
      const m = /^([\d.]+)(ns|\u00b5s|ms|s)$/.exec(s);
      return m ? Number(m[1]) * us[m[2]] : NaN;
    });
    check(trows.length === ROWS, `sandwich rows of ${file} read`, trows.length);
    // speedscope shows the first thread (lowest tid): main. Its times per method,
    // from the CCT of that thread, must be hot's where only main runs the method.
    trows.forEach((r, i) => {
      const want = mainTimes.get(r.name), h = hot.get(r.name);
      const near = (a, b) => Math.abs(a - b) <= 0.005 * b + 0.02;
      const agree = want && near(r.self, want.self / 1e3) && near(r.total, want.total / 1e3) &&
        (!r.name.startsWith('Branchy.') || (h.self_time === want.self && h.time === want.total));
      check(agree, `${file} row ${i + 1}: ${r.name}`,
            `speedscope self ${r.self} us total ${r.total} us; main thread ` +
            (want ? `${want.self / 1e3} ${want.total / 1e3} us` : 'none') +
            (h && r.name.startsWith('Branchy.') ? `; hot ${h.self_time / 1e3} ${h.time / 1e3} us` : ''));
    });
    check(trows.some((r) => r.name.startsWith('Branchy.')), `${file}: a Branchy method among the rows`);
  }

  // ----------------------------------------------------------------- pprof
  await page.goto('about:blank');
  log.length = errors.length = warnings.length = 0;
  await page.goto(pathToFileURL(app).href + '#localProfilePath=' + loaderFor('branchy.pb.gz', pprof),
                  { waitUntil: 'load', timeout: 300000 });
  await page.waitForFunction(() => document.title.endsWith(' - speedscope'), null, { timeout: 300000 });
  check(log.some((t) => t.includes('Importing as protobuf encoded pprof file')),
        'speedscope reads the pprof export', log.filter((t) => /import/i.test(t)).join('; '));
  check(errors.length === 0, 'no errors in the page', errors.join('; ') || undefined);
  const prows = await sandwich(page, (s) => Number(s.replace(/,/g, '')));
  check(prows.length === ROWS, 'sandwich rows of the pprof export read', prows.length);
  prows.forEach((r, i) => {
    const h = hot.get(r.name);
    check(h && r.self === h.self_bytecodes && r.total === h.bytecodes,
          `pprof row ${i + 1}: ${r.name}`, `speedscope self ${r.self} total ${r.total}` +
          (h ? `; hot ${h.self_bytecodes} ${h.bytecodes}` : '; not in ptdecode hot'));
  });
} finally {
  await browser.close();
}
console.log(failures ? `FAIL: ${failures} check(s)` : 'PASS');
process.exit(failures ? 1 : 0);
