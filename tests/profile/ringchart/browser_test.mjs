// Ring chart in headless Chromium: loads, every interaction, a screenshot for
// the docs, and the redraw time on a synthetic 1,000,000-node CCT.
//   node browser_test.mjs MKRING GEN_CCT.py SCREENSHOT.png
// Needs chromium (CHROMIUM=path, default /usr/bin/chromium) and
// `npm ci` in this folder (playwright-core). Exits 77 (skipped) without them.
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const LIMIT_MS = 100;  // per redraw on the 1,000,000-node CCT
const BIG = Number(process.env.RINGCHART_NODES || 1000000);

let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  console.log('SKIP: playwright-core is not installed (run npm ci in tests/profile/ringchart)');
  process.exit(77);
}
const exe = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(exe)) {
  console.log('SKIP: no chromium at ' + exe);
  process.exit(77);
}
const [mkring, gen, shot] = process.argv.slice(2);
if (!mkring || !gen || !shot) {
  console.error('usage: node browser_test.mjs MKRING GEN_CCT.py SCREENSHOT.png');
  process.exit(2);
}

const tmp = mkdtempSync(join(tmpdir(), 'ringchart-'));
function page_for(name, genArgs) {
  const json = join(tmp, name + '.json'), html = join(tmp, name + '.html');
  execFileSync('python3', [gen, ...genArgs, json], { stdio: 'inherit' });
  execFileSync(mkring, [json, html, name], { stdio: 'inherit' });
  return pathToFileURL(html).href;
}

let failures = 0;
function check(cond, what, detail) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what + (detail !== undefined ? ': ' + detail : ''));
  if (!cond) failures++;
}
const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});
const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
const page = await ctx.newPage();
const errors = [];
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
page.on('pageerror', (e) => errors.push(String(e)));
page.on('request', (r) => { if (!r.url().startsWith('file:')) errors.push('network request: ' + r.url()); });

async function open(url) {
  errors.length = 0;
  await page.goto(url, { waitUntil: 'load', timeout: 300000 });
  await page.waitForFunction(() => window.jptRing && (window.jptRing.ready || window.jptRing.error),
                             null, { timeout: 300000 });
  return page.evaluate(() => ({ error: jptRing.error, loadMs: jptRing.loadMs }));
}
const R = (fn, arg) => page.evaluate(fn, arg);

try {
  // ---------------------------------------------------------- interactions
  const small = page_for('small', ['20000', '--seed', '3']);
  let st = await open(small);
  check(!st.error && errors.length === 0, 'loads without console errors', st.error || errors.join('; ') || undefined);
  check(await R(() => jptRing.segmentCount() > 20), 'draws segments', await R(() => jptRing.segmentCount()));
  check(await R(() => jptRing.nodeCount()) === 20000, 'node count', await R(() => jptRing.nodeCount()));

  // Click a segment: it becomes the root; click the center: back.
  const seg = await R(() => jptRing.largestSegment(2));
  await page.mouse.click(seg.x, seg.y);
  check(await R(() => jptRing.root()) === seg.node, 'click on a segment makes it the root', seg.node);
  const seg2 = await R(() => jptRing.largestSegment(1));
  await page.mouse.click(seg2.x, seg2.y);
  check(await R(() => jptRing.root()) === seg2.node && (await R(() => jptRing.historyLength())) === 2,
        'second click: deeper root, history 2');
  let c = await R(() => jptRing.center());
  await page.mouse.click(c.x, c.y);
  check(await R(() => jptRing.root()) === seg.node, 'click on the center: previous root');
  await page.mouse.click(c.x, c.y);
  check(await R(() => jptRing.root()) === 0, 'click on the center again: the whole tree');

  // Depth: mouse wheel and the input.
  const d0 = await R(() => jptRing.depth());
  await page.mouse.move(c.x + 150, c.y + 20);
  await page.mouse.wheel(0, 120);
  await page.waitForFunction((d) => jptRing.depth() === d + 1, d0, { timeout: 5000 }).catch(() => {});
  check(await R(() => jptRing.depth()) === d0 + 1, 'wheel down: one ring more', await R(() => jptRing.depth()));
  await page.mouse.wheel(0, -120);
  await page.mouse.wheel(0, -120);
  await page.waitForFunction((d) => jptRing.depth() === d - 1, d0, { timeout: 5000 }).catch(() => {});
  check(await R(() => jptRing.depth()) === d0 - 1, 'wheel up: one ring less', await R(() => jptRing.depth()));
  await page.fill('#depth', '3');
  await page.press('#depth', 'Enter');
  check(await R(() => jptRing.depth() === 3 && jptRing.rings() === 3), 'depth input limits the rings to 3');
  await page.fill('#depth', '8');
  await page.press('#depth', 'Enter');

  // Sizings.
  for (const s of ['equal', 'angle', 'area']) {
    await page.selectOption('#sizing', s);
    const r = await R(() => ({ s: jptRing.sizing(), radii: jptRing.radii(), spans: jptRing.ringSpans(1),
                                kids: jptRing.childTotals(jptRing.root()), n: jptRing.segmentCount() }));
    let ok = r.s === s && r.n > 20;
    if (s === 'equal') {
      ok = ok && r.spans.every((x) => Math.abs(x - r.spans[0]) < 1e-9) && r.spans.length === r.kids.length;
    } else {
      const tot = r.kids.reduce((a, b) => a + b, 0), root = await R(() => jptRing.total());
      // angle ~ metric: each span is value / root value of the circle
      ok = ok && r.spans.every((x, i) => Math.abs(x - 2 * Math.PI * r.kids[i] / root) < 1e-9) && tot <= root * (1 + 1e-12);
    }
    const ring = r.radii.map((x, i) => (i ? x * x - r.radii[i - 1] ** 2 : x * x));
    if (s === 'area') ok = ok && ring.every((a) => Math.abs(a - ring[0]) < 1e-6 * ring[0]);
    else ok = ok && r.radii.every((x, i) => Math.abs(x - r.radii[0] * (i + 1)) < 1e-6);
    check(ok, 'sizing ' + s, r.n + ' segments');
  }
  await page.selectOption('#sizing', 'angle');
  await page.selectOption('#metric', { label: 'time' });
  check(await R(() => jptRing.metric()) === 'time', 'metric selector: time');
  await page.selectOption('#metric', { label: 'bytecodes' });

  // Hover: the tooltip shows the calling context and the metrics.
  const deep = await R(() => jptRing.largestSegment(4));
  await page.mouse.move(deep.x, deep.y);
  await page.waitForFunction(() => jptRing.tooltipText() !== '', null, { timeout: 5000 }).catch(() => {});
  const tipText = await R(() => jptRing.tooltipText());
  const ctxNames = await R((u) => jptRing.contextOf(u), deep.node);
  check(ctxNames.length === 5 && ctxNames.every((n) => tipText.includes(n)) && /bytecodes/.test(tipText),
        'hover tooltip holds the calling context and metrics', ctxNames.join(' > '));

  // Screenshot for the docs, tooltip included.
  mkdirSync(dirname(shot), { recursive: true });
  await page.screenshot({ path: shot });
  console.log('screenshot: ' + shot);
  await page.mouse.move(5, 5);

  // Recursion elimination on the 20,000-node tree: fewer nodes, same total.
  const before = await R(() => ({ n: jptRing.nodeCount(), t: jptRing.total(0) }));
  await page.check('#fold');
  const after = await R(() => ({ n: jptRing.nodeCount(), t: jptRing.total(0), f: jptRing.folded() }));
  check(after.f && after.n < before.n && Math.abs(after.t - before.t) < 1e-6 * before.t,
        'fold recursion: fewer nodes, same total', before.n + ' -> ' + after.n);
  await page.uncheck('#fold');
  check(await R(() => jptRing.nodeCount()) === before.n, 'unfold: all nodes back');

  // Per-method view: methods around the center; click one: all its contexts.
  await page.selectOption('#view', 'methods');
  check(await R(() => jptRing.treeKind()) === 'methods', 'per-method view');
  const m = await R(() => jptRing.largestSegment(1));
  const mname = await R((u) => jptRing.nodeName(u), m.node);
  await page.mouse.click(m.x, m.y);
  check(await R(() => jptRing.treeKind()) === 'callee' && (await R(() => jptRing.nodeName(0))).startsWith(mname),
        'click on a method: its contexts aggregated', mname);
  c = await R(() => jptRing.center());
  await page.mouse.click(c.x, c.y);
  check(await R(() => jptRing.treeKind()) === 'methods', 'center: back to the method list');
  check(errors.length === 0, 'no console errors during the interactions', errors.join('; ') || undefined);

  // Exact recursion elimination on the hand-made example.
  st = await open(page_for('recursion', ['--example', 'recursion']));
  check(!st.error, 'example loads', st.error || undefined);
  const ex = await R(() => ({ n: jptRing.nodeCount(), t: jptRing.total(0) }));
  await page.check('#fold');
  const exf = await R(() => {
    const names = [];
    for (let u = 0; u < jptRing.nodeCount(); u++) names.push(jptRing.contextOf(u).join('>'));
    return { n: jptRing.nodeCount(), t: jptRing.total(0), names };
  });
  check(ex.n === 8 && exf.n === 6 && exf.t === ex.t, 'example: 8 nodes fold into 6, total kept', exf.names.join(' | '));
  await R(() => jptRing.setView('methods'));
  const a = await R(() => {
    for (let u = 1; u < jptRing.nodeCount(); u++) if (jptRing.nodeName(u) === 'demo.Rec.a') return jptRing.total(u);
    return -1;
  });
  check(await R(() => jptRing.nodeCount()) === 4 && a === 210, 'example per-method: 3 methods, a = 210 bytecodes', a);

  // ------------------------------------------------------------ 1M nodes
  const t0 = Date.now();
  const bigUrl = page_for('big', [String(BIG), '--seed', '7']);
  console.log(`generated ${BIG} nodes in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  st = await open(bigUrl);
  check(!st.error && errors.length === 0, BIG + '-node CCT loads', st.error || errors.join('; ') || undefined);
  console.log(`load (parse + index): ${st.loadMs.toFixed(0)} ms`);
  check(await R(() => jptRing.nodeCount()) === BIG, 'all nodes loaded');
  const timing = await R(async () => {
    const canvas = document.getElementById('chart');
    const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
    const mouse = (type, p, extra) => new MouseEvent(type, Object.assign({ clientX: p.x, clientY: p.y, bubbles: true }, extra));
    const out = { click: [], back: [], wheel: [], clickJs: [], wheelJs: [], clickFrame: [], segs: [] };
    function timed(ev) {
      const t = performance.now();
      canvas.dispatchEvent(ev);
      jptRing.flush();  // rasterized, not just recorded
      return performance.now() - t;
    }
    for (const sizing of ['angle', 'area', 'equal']) {
      jptRing.setSizing(sizing);
      await frame();
      for (let i = 0; i < 5; i++) {
        const p = jptRing.largestSegment(1 + (i % 2));
        out.click.push(timed(mouse('click', p)));
        out.clickJs.push(jptRing.lastRedrawMs);
        out.segs.push(jptRing.segmentCount());
        await frame();
        out.back.push(timed(mouse('click', jptRing.center())));
        await frame();
        const wp = jptRing.center();
        wp.x += 100;
        out.wheel.push(timed(new WheelEvent('wheel', { clientX: wp.x, clientY: wp.y, deltaY: i % 2 ? -100 : 100, bubbles: true, cancelable: true })));
        out.wheelJs.push(jptRing.lastRedrawMs);
        out.segs.push(jptRing.segmentCount());
        await frame();
      }
    }
    // Event to the next frame, as a user sees it.
    jptRing.setSizing('angle');
    for (let i = 0; i < 5; i++) {
      const p = jptRing.largestSegment(1);
      const t = performance.now();
      canvas.dispatchEvent(mouse('click', p));
      await frame();
      out.clickFrame.push(performance.now() - t);
      jptRing.back();
      await frame();
    }
    return out;
  });
  const mc = median(timing.click), mb = median(timing.back), mw = median(timing.wheel);
  console.log(`redraw on ${BIG} nodes (median of ${timing.click.length}, event dispatch to rasterized canvas):`);
  console.log(`  after click on a segment: ${mc.toFixed(1)} ms (layout+draw calls ${median(timing.clickJs).toFixed(1)} ms; max ${Math.max(...timing.click).toFixed(1)} ms)`);
  console.log(`  after click on the center: ${mb.toFixed(1)} ms`);
  console.log(`  after wheel: ${mw.toFixed(1)} ms (layout+draw calls ${median(timing.wheelJs).toFixed(1)} ms; max ${Math.max(...timing.wheel).toFixed(1)} ms)`);
  console.log(`  click to next animation frame: ${median(timing.clickFrame).toFixed(1)} ms`);
  console.log(`  segments drawn: median ${median(timing.segs)}, max ${Math.max(...timing.segs)}`);
  for (const [name, v] of [['click', mc], ['center click', mb], ['wheel', mw]]) {
    check(v < LIMIT_MS, `redraw after ${name} under ${LIMIT_MS} ms`, v.toFixed(1) + ' ms');
  }
  const foldT = await R(() => {
    const t = performance.now();
    jptRing.recursionElimination(true);
    const r = { ms: performance.now() - t, n: jptRing.nodeCount() };
    jptRing.recursionElimination(false);
    const t2 = performance.now();
    jptRing.setView('methods');
    r.methodsMs = performance.now() - t2;
    return r;
  });
  console.log(`fold recursion (rebuild ${foldT.n} nodes): ${foldT.ms.toFixed(0)} ms; per-method view: ${foldT.methodsMs.toFixed(0)} ms`);
  check(errors.length === 0, 'no console errors on the big CCT', errors.join('; ') || undefined);
} catch (e) {
  console.error(e);
  failures++;
} finally {
  await browser.close();
  rmSync(tmp, { recursive: true, force: true });
}
console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
