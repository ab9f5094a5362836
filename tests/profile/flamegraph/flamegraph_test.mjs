// The flame graph page (`ptdecode export --format flamegraph`) in headless Chromium.
//   node flamegraph_test.mjs PTDECODE LIBJPT JAVA SAMPLES_DIR MKRING GEN_CCT.py WORKDIR SCREENSHOT.png
// Records Branchy with -Xint in the agent's reference mode (again, and with
// twice the rounds, for `ptdecode diff`: no change between two runs, the
// per-round methods' calls doubled), exports its flame
// graph and `ptdecode hot --json`, and drives the page as a user would (typing,
// clicking, the selectors): the page loads with nothing fetched; its totals are
// hot's; a search highlights exactly the matching frames and its share is the
// method's inclusive value in hot; a click zooms; the reversed view puts each
// method's exclusive value at the root and its callers above; the threads and
// metric selectors and the flame orientation change what is drawn; the
// differential page holds both runs' values and colours by change; damaged
// documents are refused with a message. Then a
// synthetic 1,000,000-node CCT (FLAMEGRAPH_NODES) measures load and redraw
// times, failing above 100 ms a redraw.
// Needs chromium (CHROMIUM=path, default /usr/bin/chromium) and `npm ci` in
// this folder (playwright-core). Exits 77 (skipped) without them.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const LIMIT_MS = 100;  // per redraw of the large CCT
const BIG = Number(process.env.FLAMEGRAPH_NODES || 1000000);

const [ptdecode, libjpt, java, samples, mkring, gen, work, shot] = process.argv.slice(2);
if (!shot) {
  console.error('usage: node flamegraph_test.mjs PTDECODE LIBJPT JAVA SAMPLES_DIR MKRING GEN_CCT.py WORKDIR SCREENSHOT.png');
  process.exit(2);
}
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  console.log('SKIP: playwright-core is not installed (run npm ci in tests/profile/flamegraph)');
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
const sum = (a) => a.reduce((x, y) => x + y, 0);

// ------------------------------------------------------------- the profile
rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'classes'), { recursive: true });
run(join(dirname(java), 'javac'), ['--release', '17', '-d', join(work, 'classes'),
                                   join(samples, 'Branchy.java')]);
const trace = join(work, 'ref.trace');
run(java, [`-agentpath:${libjpt}=mode=reference,out=${trace}`, '-Xint',
           '-cp', join(work, 'classes'), 'Branchy', '20']);
const html = join(work, 'branchy.html');
run(ptdecode, ['export', trace, '--format', 'flamegraph', '-o', html]);
const hotList = JSON.parse(run(ptdecode, ['hot', trace, '-n', '1000000', '--json']));
const hot = new Map(hotList.map((m) => [m.method, m]));
const FIB = 'Branchy.fib(int)', COLLATZ = 'Branchy.collatzSteps(long)', MAIN = 'Branchy.main(java.lang.String[])';
check(hot.has(FIB) && hot.has(COLLATZ) && hot.has(MAIN), 'hot lists Branchy\'s methods');

// ------------------------------------------------------------- ptdecode diff
// The same run again, and one with twice the rounds: a deterministic program
// (-Xint, reference mode) differs only where its runs differ.
const again = join(work, 'again.trace'), twice = join(work, 'twice.trace');
run(java, [`-agentpath:${libjpt}=mode=reference,out=${again}`, '-Xint', '-cp', join(work, 'classes'), 'Branchy', '20']);
run(java, [`-agentpath:${libjpt}=mode=reference,out=${twice}`, '-Xint', '-cp', join(work, 'classes'), 'Branchy', '40']);
for (const by of ['calls', 'bytecodes']) {
  const same = JSON.parse(run(ptdecode, ['diff', trace, again, '--json', '--by', by, '-n', '1000000']));
  const moved = same.methods.filter((r) => r.a !== r.b).concat(same.contexts.filter((r) => r.a !== r.b));
  check(same.totals.a === same.totals.b && same.totals.a > 0 && moved.length === 0 && same.methods.length > 100,
        `diff of two runs of Branchy 20: no ${by} changed`,
        `${same.methods.length} methods, ${same.contexts.length} contexts; ` +
        moved.slice(0, 3).map((r) => (r.method || r.context.join(' > ')) + ` ${r.a} -> ${r.b}`).join('; '));
}
const dd = JSON.parse(run(ptdecode, ['diff', trace, twice, '--json', '--by', 'calls', '-n', '1000000']));
const calls = new Map(dd.methods.map((r) => [r.method, r]));
const per = (name) => calls.get(name) || { a: -1, b: -1 };
const scaled = ['Branchy.collatzSteps(long)', 'Branchy.classify(int)', 'Branchy.sparse(int)',
                'Branchy.parse(java.lang.String)'];
check(scaled.every((n) => per(n).a === 20 && per(n).b === 40) && per(FIB).a === 8361 && per(FIB).b === 8361 &&
      per(MAIN).a === 1 && per(MAIN).b === 1,
      'diff of Branchy 20 and 40: the per-round methods\' calls double, fib\'s and main\'s stay',
      [...scaled, FIB, MAIN].map((n) => `${n.replace('Branchy.', '')} ${per(n).a} -> ${per(n).b}`).join(', '));
check(dd.methods[0].b - dd.methods[0].a >= Math.abs(dd.methods[dd.methods.length - 1].b - dd.methods[dd.methods.length - 1].a),
      'rows come largest change first');
const diffHtml = join(work, 'diff.html');
run(ptdecode, ['diff', trace, twice, '-n', '3', '-o', diffHtml]);

const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu',
         '--disable-background-networking', '--disable-component-update'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) errors.push('network request: ' + r.url()); });
  const R = (fn, arg) => page.evaluate(fn, arg);
  const open = async (url) => {
    errors.length = 0;
    await page.goto(url, { waitUntil: 'load', timeout: 300000 });
    await page.waitForFunction(() => window.jptFlame && (jptFlame.ready || jptFlame.error), null,
                               { timeout: 300000 });
  };
  const frames = () => R(() => jptFlame.frames());
  const settle = () => page.waitForTimeout(300);   // the search box waits for typing to pause

  // ---------------------------------------------------------- loading
  await open(pathToFileURL(html).href);
  check(!(await R(() => jptFlame.error)) && errors.length === 0, 'loads without errors or network',
        (await R(() => jptFlame.error)) || errors.join('; ') || undefined);
  check(await R(() => jptFlame.metric()) === 'bytecodes', 'bytecodes shown first (as ptdecode hot ranks)');

  // ---------------------------------------------------------- totals = hot's
  for (const [metric, key] of [['calls', 'calls'], ['bytecodes', 'self_bytecodes'], ['time', 'self_time']]) {
    const [total, outside] = await R((m) => [jptFlame.total(m), jptFlame.unattributed(m)], metric);
    const want = sum(hotList.map((h) => h[key]));
    check(total - outside === want && total > 0, `total ${metric} is hot's`,
          `page ${total} (of which ${outside} outside any frame), hot ${want}`);
  }

  // ---------------------------------------------------------- search
  await page.fill('#search', FIB);
  await settle();
  let fs = await frames();
  const lit = fs.filter((f) => f.matched), fib = hot.get(FIB);
  check(lit.length > 5 && lit.every((f) => f.name === FIB), 'search highlights the fib frames',
        lit.length + ' highlighted: ' + [...new Set(lit.map((f) => f.name))].join(', '));
  check(fs.filter((f) => f.name === FIB && !f.matched).length === 0, 'every fib frame is highlighted');
  let m = await R(() => jptFlame.matched());
  check(m && m.value.bytecodes === fib.bytecodes && m.value.time === fib.time,
        'the match is fib\'s inclusive bytecodes and time in hot',
        m && `page ${m.value.bytecodes} / ${m.value.time}, hot ${fib.bytecodes} / ${fib.time}`);
  const shown = await page.textContent('#match');
  const pct = (100 * fib.bytecodes / (await R(() => jptFlame.total()))).toFixed(2) + '%';
  check(shown.includes(pct), 'the share is shown', shown);
  await page.check('#regex');
  await page.fill('#search', '^Branchy\\.(fib|collatzSteps)\\(');
  await settle();
  fs = await frames();
  const names = new Set(fs.filter((f) => f.matched).map((f) => f.name));
  m = await R(() => jptFlame.matched());
  check(names.size === 2 && names.has(FIB) && names.has(COLLATZ) && m.methods === 2,
        'a regular expression matches its two methods', [...names].join(', '));
  check(m.value.bytecodes === fib.bytecodes + hot.get(COLLATZ).bytecodes,
        'their share adds up (neither calls the other)', m.value.bytecodes);
  await page.fill('#search', '(');
  await settle();
  check(await page.evaluate(() => document.getElementById('search').classList.contains('bad')) &&
        !(await R(() => jptFlame.matched())), 'a broken expression is marked, nothing matched');
  await page.uncheck('#regex');
  await page.fill('#search', '');
  await settle();

  // ---------------------------------------------------------- zoom
  fs = await frames();
  const target = fs.find((f) => f.name === COLLATZ && f.visible && f.w > 8);
  check(!!target, 'collatzSteps is drawn');
  const width = await page.evaluate(() => document.getElementById('chart').clientWidth);
  if (target) {
    await page.mouse.click(target.x + target.w / 2, target.y + target.h / 2);
    fs = await frames();
    const z = fs.find((f) => f.name === COLLATZ && !f.ancestor);
    check(await R(() => jptFlame.focus()) === COLLATZ && z && Math.abs(z.w - width) < 1,
          'a click zooms into the frame: it spans the width', z && z.w + ' of ' + width + ' px');
    check(fs.some((f) => f.ancestor && f.name === MAIN), 'its callers stay drawn above it');
    await page.keyboard.press('Escape');
    check(await R(() => jptFlame.focus()) !== COLLATZ, 'Escape zooms out');
  }

  // ---------------------------------------------------------- reversed
  await page.check('#reversed');
  fs = await frames();
  const top = fs.filter((f) => f.depth === 1 && !f.ancestor && hot.has(f.name));
  const wrong = top.filter((f) => f.value.bytecodes !== hot.get(f.name).self_bytecodes ||
                                  f.value.time !== hot.get(f.name).self_time);
  check(top.length > 20 && wrong.length === 0,
        'reversed: each method at the root holds its exclusive bytecodes and time in hot',
        `${top.length} methods` + (wrong.length ? '; differ: ' + wrong.slice(0, 3).map((f) => f.name).join(', ') : ''));
  // main's call of fib(18) runs 13 bytecodes of fib's: too narrow to draw, so the
  // callers are read from the page's frames, drawn or not.
  const rootName = (await frames()).find((f) => f.depth === 0).name;
  const callers = await R((p) => jptFlame.children(p), [FIB]);
  const drawnCallers = fs.filter((f) => f.depth === 2 && f.path[1] === FIB).map((f) => f.name);
  check(callers && callers.length === 2 && callers.some((c) => c.name === FIB) &&
        callers.some((c) => c.name === MAIN) && sum(callers.map((c) => c.value.bytecodes)) === fib.self_bytecodes &&
        drawnCallers.includes(FIB), 'reversed: fib\'s callers are fib and main, fib drawn',
        callers && callers.map((c) => c.name + ' ' + c.value.bytecodes).join(', ') + ' (under ' + rootName + ')');
  const c3 = fs.filter((f) => f.depth === 2 && f.path[1] === COLLATZ).map((f) => f.name);
  check(c3.length === 1 && c3[0] === MAIN, 'reversed: collatzSteps is drawn called by main', c3.join(', '));
  await page.uncheck('#reversed');

  // ---------------------------------------------------------- threads
  const options = await page.$$eval('#thread option', (os) => os.map((o) => o.value));
  const all = await R(() => jptFlame.total());
  let perThread = 0, mainTotal = 0;
  for (const v of options.filter((o) => o !== 'all' && o !== 'each')) {
    await page.selectOption('#thread', v);
    const t = await R(() => jptFlame.total());
    perThread += t;
    if ((await page.$eval('#thread', (s) => s.selectedOptions[0].textContent)).startsWith('main ')) mainTotal = t;
  }
  check(options.length >= 3 && perThread === all, 'the threads add up to all threads',
        `${options.length - 2} threads, ${perThread} of ${all}`);
  check(mainTotal > 0.9 * all, 'the main thread holds most of Branchy', mainTotal);
  await page.selectOption('#thread', 'each');
  fs = await frames();
  check(fs.filter((f) => f.depth === 1).every((f) => / \(tid \d+\)$/.test(f.name)),
        'by thread: the threads are the first frames below the root');
  await page.selectOption('#thread', 'all');

  // ---------------------------------------------------------- kinds
  fs = await frames();
  const fibFrame = fs.find((f) => f.name === FIB);
  check(fibFrame && fibFrame.kinds === 'interpreted', 'an -Xint frame is interpreted', fibFrame && fibFrame.kinds);
  check(fs.some((f) => f.kinds === 'native'), 'native methods are marked native',
        fs.filter((f) => f.kinds === 'native').slice(0, 2).map((f) => f.name).join(', '));

  // ---------------------------------------------------------- metric, orientation
  await page.selectOption('#metric', { label: 'calls' });
  check(await R(() => jptFlame.metric()) === 'calls', 'the metric picker switches to calls');
  fs = await frames();
  // fib calls nothing but itself: its outermost frame holds all its calls
  const fibCalls = fs.filter((f) => f.name === FIB && f.path.length === 3);
  check(fibCalls.length === 1 && fibCalls[0].value.calls === hot.get(FIB).calls,
        'by calls: the outermost fib frame holds hot\'s calls of fib',
        fibCalls.length && fibCalls[0].value.calls + ' of ' + hot.get(FIB).calls);
  await page.selectOption('#metric', { label: 'bytecodes' });
  await page.selectOption('#layout', 'flame');
  fs = await frames();
  const root = fs.find((f) => f.depth === 0), child = fs.find((f) => f.depth === 1);
  check(root && child && root.y > child.y, 'flame orientation: the root at the bottom',
        root && child && `root y ${root.y}, child y ${child.y}`);
  await page.selectOption('#layout', 'icicle');
  await page.fill('#search', 'Branchy.');
  await settle();
  await page.screenshot({ path: shot });
  console.log('screenshot: ' + shot);

  // ---------------------------------------------------------- differential
  await open(pathToFileURL(diffHtml).href);
  check(!(await R(() => jptFlame.error)) && errors.length === 0 && await R(() => jptFlame.differential()),
        'the differential flame graph loads', (await R(() => jptFlame.error)) || errors.join('; ') || undefined);
  fs = await frames();     // by bytecodes: collatzSteps is wide
  const dc = fs.find((f) => f.name === COLLATZ && !f.ancestor);
  check(dc && dc.value.calls === 40 && dc.base.calls === 20, 'a frame holds both runs\' values',
        dc && `collatzSteps calls ${dc.base.calls} -> ${dc.value.calls}`);
  await page.selectOption('#metric', { label: 'calls' });
  const grew = await R((p) => jptFlame.change(p), [MAIN, COLLATZ]);
  const same = await R((p) => jptFlame.change(p), [MAIN, FIB]);
  check(grew === 0.5 && same === 0, 'colour by change: collatzSteps grew by half of its new calls, fib not',
        `${grew}, ${same}`);
  await page.check('#normalize');
  const share = await R((p) => jptFlame.change(p), [MAIN, FIB]);
  check(share < 0, 'normalized: fib\'s share of the calls shrank', share);
  await page.uncheck('#normalize');
  await page.selectOption('#metric', { label: 'bytecodes' });
  const before = dc ? dc.w : 0;
  await page.selectOption('#width', 'base');
  fs = await frames();
  const narrow = fs.find((f) => f.name === COLLATZ && !f.ancestor);
  check(narrow && narrow.w < before, 'width from the baseline: collatzSteps narrower',
        narrow && `${before.toFixed(1)} -> ${narrow.w.toFixed(1)} px`);
  await page.screenshot({ path: shot.replace(/\.png$/, '-diff.png') });

  // ---------------------------------------------------------- hostile documents
  const bad = [
    ['{"format":"jpt-cct","version":1,"metrics":["calls"],"methods":[],"nodes":{"parent":[-1,2,0],' +
     '"method":[-1,-1,-1],"calls":[0,1,1]}}', 'not in preorder'],
    ['{"format":"jpt-cct","version":1,"metrics":["calls"],"methods":[],"nodes":{"parent":[-1,0],' +
     '"method":[-1,3],"calls":[0,1]}}', 'no method 3'],
    ['{"format":"jpt-cct","version":2,"nodes":{}}', 'unsupported cct-json version'],
    ['{"format":"jpt-cct","version":1,"methods":[],"nodes":{"parent":[-1],"method":[-1]}}',
     'no metric'],
  ];
  for (const [i, [json, says]] of bad.entries()) {
    const f = join(work, `bad${i}.json`), h = join(work, `bad${i}.html`);
    writeFileSync(f, json);
    execFileSync(mkring, ['--flamegraph', f, h]);
    await open(pathToFileURL(h).href);
    const err = await R(() => jptFlame.error);
    check(err && err.includes(says) && errors.length === 0 &&
          (await page.textContent('#msg')).includes(says),
          `a damaged document is refused with a message: ${says}`, err || errors.join('; '));
  }

  // ---------------------------------------------------------- a large tree
  const big = join(work, 'big.json'), bigHtml = join(work, 'big.html');
  execFileSync('python3', [gen, String(BIG), big, '--threads', '4', '--seed', '5'], { stdio: 'inherit' });
  execFileSync(mkring, ['--flamegraph', big, bigHtml, 'big'], { stdio: 'inherit' });
  await open(pathToFileURL(bigHtml).href);
  check(!(await R(() => jptFlame.error)) && errors.length === 0, `${BIG} nodes load`,
        (await R(() => jptFlame.error)) || errors.join('; ') || undefined);
  const load = await R(() => jptFlame.timings().loadMs);
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  const normal = [];
  for (let i = 0; i < 7; i++) normal.push(await R(() => jptFlame.redraw()));
  const drawnNormal = (await frames()).length;
  const t0 = Date.now();
  await page.check('#reversed');
  const reversedMs = Date.now() - t0;
  const reversed = [];
  for (let i = 0; i < 7; i++) reversed.push(await R(() => jptFlame.redraw()));
  const drawnReversed = (await frames()).length;
  console.log(`large tree: load ${load.toFixed(0)} ms; redraw (layout and draw calls) ` +
              `${normal.map((x) => x.toFixed(1)).join(' ')} ms, ${drawnNormal} frames; reversed view ` +
              `${reversedMs} ms to build, redraw ${reversed.map((x) => x.toFixed(1)).join(' ')} ms, ` +
              `${drawnReversed} frames`);
  for (const [name, t] of [['normal', normal], ['reversed', reversed]]) {
    check(median(t) < LIMIT_MS, `${name} view: a redraw of the ${BIG}-node tree takes under ${LIMIT_MS} ms`,
          'median ' + median(t).toFixed(1) + ' ms');
  }
  check(errors.length === 0, 'no errors', errors.join('; ') || undefined);
} finally {
  await browser.close();
}
console.log(failures ? `FAIL: ${failures} check(s)` : 'PASS');
process.exit(failures ? 1 : 0);
