// Folded stacks (`ptdecode export --format folded`) read by a flame-graph tool
// that is not ours: speedscope, in headless Chromium.
//   node speedscope_test.mjs PTDECODE LIBJPT JAVA SAMPLES_DIR WORKDIR SCREENSHOT.png
// Records Branchy with -Xint in the agent's reference mode, exports its folded
// stacks by bytecodes, and loads them into speedscope as its command line does
// (index.html#localProfilePath=FILE.js). Checks that speedscope imports them
// as collapsed stacks without an error, and that its sandwich table (self and
// total per method) holds, for each row it shows, what the folded lines sum to
// and what `ptdecode hot` reports (exclusive bytecodes, and inclusive ones
// with a recursive activation counted once, as a flame graph counts a frame
// once per stack). Saves the flame graph as SCREENSHOT.png.
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

// ------------------------------------------------------------- speedscope
// As speedscope's command line opens a file: a script that hands the bytes over.
const loader = join(work, 'load-profile.js');
writeFileSync(loader, 'speedscope.loadFileFromBase64(' + JSON.stringify('branchy.folded') + ', ' +
              JSON.stringify(readFileSync(folded).toString('base64')) + ')');
const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
         '--disable-background-networking', '--disable-component-update'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const log = [], errors = [];
  page.on('console', (m) => (m.type() === 'error' ? errors : log).push(m.text()));
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

  // The sandwich view's table: "TOTAL (pct)", "SELF (pct)", name, row by row,
  // sorted by self, heaviest first.
  await page.getByText('Sandwich').click();
  await page.getByText('Symbol Name').waitFor();
  const text = await page.evaluate(() => document.body.innerText);
  const cells = text.slice(text.indexOf('Symbol Name') + 'Symbol Name'.length)
    .split('\n').map((s) => s.trim()).filter((s) => s);
  const num = (s) => Number(s.replace(/\s*\(.*\)$/, '').replace(/,/g, ''));
  const rows = [];
  for (let i = 0; i + 2 < cells.length && rows.length < ROWS; i += 3)
    rows.push({ total: num(cells[i]), self: num(cells[i + 1]), name: cells[i + 2] });
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
} finally {
  await browser.close();
}
console.log(failures ? `FAIL: ${failures} check(s)` : 'PASS');
process.exit(failures ? 1 : 0);
