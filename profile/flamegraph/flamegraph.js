/* Flame graph of a calling context tree (cct-json, {"format":"jpt-cct",
 * "version":1}) on a 2D canvas.
 *
 * A frame of the graph is a set of CCT nodes: in the normal view the nodes
 * of one path of methods (threads merged, or one thread), in the reversed
 * view the nodes that ran the metric whose chain of callers reads, from the
 * root, as that path, together with the caller reached at the frame's
 * depth. A frame's children are found by grouping its nodes' children (or
 * callers) by method, and only when the frame is wide enough to be drawn:
 * the work of a redraw is bounded by what is visible, not by the tree.
 * Frames are kept once built, so zooming and metric changes only lay out
 * again.
 *
 * A document with a "baseline" (ptdecode diff) is a differential flame graph:
 * frames carry both runs' values, are sized by one run and coloured by the
 * change from the baseline. */
(function () {
  'use strict';

  const ROW = 17;          // px per frame row
  const MIN_PX = 0.4;      // narrower than this: neither drawn nor expanded
  const LABEL_PX = 24;     // narrower than this: no label
  const FONT = '11px ui-monospace, monospace';
  // cct-json nodes.kind bits (profile/cct.h PF_KIND_*)
  const K_INTERP = 1, K_COMPILED = 2, K_INLINED = 4, K_NATIVE = 8, K_TRUNCATED = 16;
  const PRIM = { B: 'byte', C: 'char', D: 'double', F: 'float', I: 'int', J: 'long', S: 'short',
                 Z: 'boolean', V: 'void' };

  const el = (id) => document.getElementById(id);
  const stage = el('stage'), spacer = el('spacer'), canvas = el('chart'), tip = el('tip');
  const ctx = canvas.getContext('2d');

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  // Colour classes: how the frame ran. Shades vary by name so neighbours differ.
  const CLASSES = [
    { id: 'interpreted', label: 'interpreted', hue: 100, span: 30, sat: 52, light: 58 },
    { id: 'compiled', label: 'compiled', hue: 200, span: 22, sat: 62, light: 66 },
    { id: 'inlined', label: 'inlined (compiled)', hue: 172, span: 16, sat: 55, light: 64 },
    { id: 'mixed', label: 'interpreted and compiled', hue: 255, span: 25, sat: 42, light: 74 },
    { id: 'native', label: 'native', hue: 8, span: 18, sat: 72, light: 64 },
    { id: 'unknown', label: 'not known', hue: 28, span: 24, sat: 82, light: 60 },
  ];
  const SHADES = 8;
  for (const c of CLASSES) {
    c.fill = [];
    for (let i = 0; i < SHADES; i++) {
      c.fill.push('hsl(' + (c.hue + c.span * i / SHADES).toFixed(1) + ',' + c.sat + '%,' +
                  (c.light + (i % 3) * 3) + '%)');
    }
  }
  const ROOT_FILL = 'hsl(220,10%,80%)', MATCH_FILL = 'hsl(300,78%,62%)', TRUNC_MARK = '#7a1010';

  function kindClass(k) {
    if (k & K_NATIVE) return 4;
    const compiled = k & (K_COMPILED | K_INLINED);
    if (compiled && (k & K_INTERP)) return 3;
    if (k & K_INLINED) return 2;
    if (compiled) return 1;
    if (k & K_INTERP) return 0;
    return 5;
  }

  function kindText(k) {
    const out = [];
    if (k & K_INTERP) out.push('interpreted');
    if (k & K_COMPILED) out.push('compiled');
    if (k & K_INLINED) out.push('inlined');
    if (k & K_NATIVE) out.push('native');
    return out.length ? out.join(', ') : 'how it ran is not known';
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  }

  // "(Ljava/lang/String;I)V" -> "(java.lang.String, int)", as ptdecode names methods.
  function params(sig) {
    const out = [];
    let i = sig[0] === '(' ? 1 : 0;
    while (i < sig.length && sig[i] !== ')') {
      let dims = 0;
      while (sig[i] === '[') { dims++; i++; }
      const c = sig[i];
      if (c === undefined) break;
      i++;
      let t;
      if (c === 'L') {
        const e = sig.indexOf(';', i), end = e < 0 ? sig.length : e;
        t = sig.slice(i, end).replace(/\//g, '.');
        i = e < 0 ? end : end + 1;
      } else {
        t = PRIM[c] || c;
      }
      out.push(t + '[]'.repeat(dims));
    }
    return '(' + out.join(', ') + ')';
  }

  /* ---------------------------------------------------------------- data */

  let D = null;
  const st = { thread: 'all', metric: 0, reversed: false, flame: false, sigs: true,
               widthBase: false, normalize: false,
               root: null, focus: null, match: null, matchInfo: null };
  const T = { loadMs: 0, layoutMs: 0, drawMs: 0 };

  function load(doc) {
    if (!doc || typeof doc !== 'object' || doc.format !== 'jpt-cct') {
      throw new Error('not a cct-json document ("format" must be "jpt-cct")');
    }
    if (doc.version !== 1) throw new Error('unsupported cct-json version ' + doc.version);
    const nd = doc.nodes || {};
    if (!Array.isArray(nd.parent) || !Array.isArray(nd.method) || nd.parent.length === 0 ||
        nd.method.length !== nd.parent.length) {
      throw new Error('cct-json: nodes.parent / nodes.method missing or of different lengths');
    }
    const n = nd.parent.length;
    const P = Int32Array.from(nd.parent), M = Int32Array.from(nd.method);
    const methods = Array.isArray(doc.methods) ? doc.methods : [];
    if (P[0] !== -1) throw new Error('cct-json: node 0 must be the root (parent -1)');
    for (let i = 1; i < n; i++) {
      if (!(P[i] >= 0 && P[i] < i)) {
        throw new Error('cct-json: nodes are not in preorder (node ' + i + ' has parent ' + P[i] + ')');
      }
      if (M[i] >= methods.length) throw new Error('cct-json: node ' + i + ': no method ' + M[i]);
    }
    const kind = Array.isArray(nd.kind) && nd.kind.length === n ? Uint8Array.from(nd.kind)
                                                                 : new Uint8Array(n);
    // Subtree ends (preorder: node i's subtree is [i, end[i])) and the children index.
    const size = new Int32Array(n).fill(1);
    for (let i = n - 1; i > 0; i--) size[P[i]] += size[i];
    const end = new Int32Array(n);
    for (let i = 0; i < n; i++) end[i] = i + size[i];
    const first = new Int32Array(n + 1), kids = new Int32Array(Math.max(n - 1, 0));
    for (let i = 1; i < n; i++) first[P[i] + 1]++;
    for (let i = 0; i < n; i++) first[i + 1] += first[i];
    const pos = first.slice(0, n);
    for (let i = 1; i < n; i++) kids[pos[P[i]]++] = i;

    const metrics = [], self = [], incl = [];
    for (const k of (Array.isArray(doc.metrics) ? doc.metrics : [])) {
      if (!Array.isArray(nd[k]) || nd[k].length !== n) continue;
      metrics.push(k);
      const sk = nd['self_' + k];
      if (Array.isArray(sk) && sk.length === n) {
        self.push(Float64Array.from(sk));
        incl.push(Float64Array.from(nd[k]));
      } else {
        // A per-node count (calls): a frame's width is its subtree's.
        const s = Float64Array.from(nd[k]), inc = Float64Array.from(s);
        for (let i = n - 1; i > 0; i--) inc[P[i]] += inc[i];
        self.push(s);
        incl.push(inc);
      }
    }
    if (!metrics.length) throw new Error('cct-json: no metric with a value per node');
    // The baseline run of a differential document: the same nodes, its values.
    let base = null;
    const bn = doc.baseline && doc.baseline.nodes;
    if (bn && typeof bn === 'object') {
      base = { title: String(doc.baseline.title || 'baseline'), self: [], incl: [] };
      for (const k of metrics) {
        const sk = bn['self_' + k], ik = bn[k];
        if (!Array.isArray(ik) || ik.length !== n || (sk !== undefined && (!Array.isArray(sk) || sk.length !== n))) {
          throw new Error('cct-json: baseline.nodes.' + k + ' missing or not of ' + n + ' nodes');
        }
        if (sk) {
          base.self.push(Float64Array.from(sk));
          base.incl.push(Float64Array.from(ik));
        } else {
          const s = Float64Array.from(ik), inc = Float64Array.from(s);
          for (let i = n - 1; i > 0; i--) inc[P[i]] += inc[i];
          base.self.push(s);
          base.incl.push(inc);
        }
      }
    }
    const labels = new Map();
    if (doc.labels && typeof doc.labels === 'object') {
      for (const k of Object.keys(doc.labels)) labels.set(Number(k), String(doc.labels[k]));
    }
    const mname = [], msimple = [], mfill = [];
    for (let m = 0; m < methods.length; m++) {
      const me = methods[m] || {};
      const cls = String(me.class === undefined ? '?' : me.class), nm = String(me.name || '?');
      if (cls === '?') {
        const s = nm === '0x0' ? '?' : nm;   // a frame the trace could not name
        mname.push(s);
        msimple.push(s);
      } else {
        const dotted = cls.replace(/\//g, '.');
        mname.push(dotted + '.' + nm + params(String(me.sig || '')));
        msimple.push(dotted + '.' + nm);
      }
      mfill.push(hash(msimple[m]) % SHADES);
    }
    // Siblings are drawn in name order, so a frame keeps its place across
    // metrics and threads.
    const order = [...mname.keys()].sort((a, b) => (mname[a] < mname[b] ? -1 : mname[a] > mname[b] ? 1 : 0));
    const rank = new Int32Array(methods.length);
    order.forEach((m, r) => { rank[m] = r; });
    const threads = [];
    for (let j = first[0]; j < first[1]; j++) if (M[kids[j]] < 0) threads.push(kids[j]);
    const hz = Number(doc.tsc_hz);
    D = { title: String(doc.title || ''), n, P, M, kind, end, first, kids, metrics, self, incl,
          labels, mname, msimple, mfill, rank, threads, tscHz: hz > 0 ? hz : 0, base };
  }

  const K = () => D.metrics.length;

  function threadLabel(node) {
    return D.labels.get(node) || 'thread (node ' + node + ')';
  }

  // A frame: key >= 0 a method, key < 0 the thread root node -1 - key.
  // tot, self: the run shown; btot, bself: the baseline's (differential only).
  function frame(parent, key, nodes, leaves) {
    const k = K(), b = D.base ? k : 0;
    return { parent, depth: parent ? parent.depth + 1 : 0, key, nodes, leaves,
             tot: new Float64Array(k), self: new Float64Array(k), btot: new Float64Array(b),
             bself: new Float64Array(b), kinds: 0, kids: null };
  }

  // Normal view: CCT node u's inclusive values are the frame's total.
  function addNode(f, u) {
    for (let m = 0; m < f.tot.length; m++) {
      f.tot[m] += D.incl[m][u];
      f.self[m] += D.self[m][u];
    }
    for (let m = 0; m < f.btot.length; m++) {
      f.btot[m] += D.base.incl[m][u];
      f.bself[m] += D.base.self[m][u];
    }
  }

  // Reversed view: a leaf's own values, the frame's self where its chain ends.
  function addLeaf(f, leaf, ends) {
    for (let m = 0; m < f.tot.length; m++) {
      const v = D.self[m][leaf];
      f.tot[m] += v;
      if (ends) f.self[m] += v;
    }
    for (let m = 0; m < f.btot.length; m++) {
      const v = D.base.self[m][leaf];
      f.btot[m] += v;
      if (ends) f.bself[m] += v;
    }
  }

  // The value a frame is sized by.
  function size(f, m) {
    return (st.widthBase && D.base ? f.btot : f.tot)[m];
  }

  function frameName(f) {
    if (f.key >= 0) return st.sigs ? D.mname[f.key] : D.msimple[f.key];
    if (f.key === ROOT_KEY) return rootName();
    return threadLabel(-1 - f.key);
  }
  const ROOT_KEY = -1e15;

  function rootName() {
    if (st.thread === 'all') return D.threads.length ? 'all threads (' + D.threads.length + ')' : 'all threads';
    if (st.thread === 'each') return 'all threads, by thread';
    return threadLabel(Number(st.thread));
  }

  function nodeKey(c) {
    return D.M[c] >= 0 ? D.M[c] : -1 - c;
  }

  function sortKids(f) {
    f.kids.sort((a, b) => {
      if ((a.key < 0) !== (b.key < 0)) return a.key < 0 ? -1 : 1;
      return a.key < 0 ? b.key - a.key : D.rank[a.key] - D.rank[b.key];
    });
  }

  // The CCT nodes the view covers: [lo, hi) in preorder.
  function selection() {
    if (st.thread === 'all' || st.thread === 'each') return [1, D.n];
    const t = Number(st.thread);
    return [t, D.end[t]];
  }

  function buildRoot() {
    const k = K(), [lo, hi] = selection();
    let root;
    if (!st.reversed) {
      // (a document without thread roots, as a diff's: the root's children are methods)
      const nodes = st.thread === 'all' && D.threads.length ? Int32Array.from(D.threads)
                  : st.thread === 'all' ? Int32Array.of(0)
                  : st.thread === 'each' ? Int32Array.of(0) : Int32Array.of(lo);
      // Merged threads: the thread roots' children are the root's, and
      // their own values (outside every frame) the root's own.
      root = frame(null, ROOT_KEY, nodes, null);
      for (const u of nodes) addNode(root, u);
    } else {
      // Every node that ran any metric (in either run) is a leaf.
      const ran = (i) => {
        for (let m = 0; m < k; m++) if (D.self[m][i] > 0 || (D.base && D.base.self[m][i] > 0)) return true;
        return false;
      };
      let count = 0;
      for (let i = lo; i < hi; i++) if (ran(i)) count++;
      const leaves = new Int32Array(count);
      count = 0;
      for (let i = lo; i < hi; i++) if (ran(i)) leaves[count++] = i;
      root = frame(null, ROOT_KEY, null, leaves);
      for (const u of root.leaves) addLeaf(root, u, false);
    }
    st.root = root;
    st.focus = root;
  }

  function expandNormal(f) {
    const groups = new Map(), { first, kids } = D;
    for (const u of f.nodes) {
      for (let j = first[u]; j < first[u + 1]; j++) {
        const c = kids[j], key = nodeKey(c);
        let g = groups.get(key);
        if (!g) groups.set(key, (g = []));
        g.push(c);
      }
    }
    f.kids = [];
    for (const [key, arr] of groups) {
      const c = frame(f, key, Int32Array.from(arr), null);
      for (const u of c.nodes) {
        c.kinds |= D.kind[u];
        addNode(c, u);
      }
      f.kids.push(c);
    }
    sortKids(f);
  }

  // The caller of CCT node c in the reversed view, or -1 where the chain ends.
  function callerOf(c) {
    const p = D.P[c];
    if (p <= 0) return -1;
    if (D.M[p] >= 0) return p;
    return st.thread === 'each' ? p : -1;    // a thread root: a frame only when threads are shown
  }

  // Groups items by key (a method, or a thread root's negative key) into
  // typed arrays in one counting pass: the root of the reversed view holds
  // every node of the tree, and building it must not make garbage per node.
  let slotOf = null;      // method -> group index during a grouping, else -1
  function groupBy(n, keyOf) {
    if (!slotOf || slotOf.length !== D.mname.length) slotOf = new Int32Array(D.mname.length).fill(-1);
    const gid = new Int32Array(n), keys = [], counts = [], threadSlot = new Map();
    for (let i = 0; i < n; i++) {
      const key = keyOf(i);
      if (key === null) {
        gid[i] = -1;
        continue;
      }
      let g = key >= 0 ? slotOf[key] : threadSlot.get(key);
      if (g === undefined || g < 0) {
        g = keys.length;
        keys.push(key);
        counts.push(0);
        if (key >= 0) slotOf[key] = g;
        else threadSlot.set(key, g);
      }
      counts[g]++;
      gid[i] = g;
    }
    for (const key of keys) if (key >= 0) slotOf[key] = -1;
    return { gid, keys, counts };
  }

  function expandReversed(f) {
    const isRoot = f.parent === null, n = f.leaves.length;
    const cur = isRoot ? f.leaves : new Int32Array(n);
    if (!isRoot) for (let i = 0; i < n; i++) cur[i] = callerOf(f.nodes[i]);
    const { gid, keys, counts } = groupBy(n, (i) => (cur[i] < 0 ? null : nodeKey(cur[i])));
    const kids = keys.map((key, g) => frame(f, key, new Int32Array(counts[g]), new Int32Array(counts[g])));
    const fill = new Int32Array(keys.length);
    for (let i = 0; i < n; i++) {
      const g = gid[i];
      if (g < 0) continue;
      const c = kids[g], at = fill[g]++, leaf = f.leaves[i], node = cur[i];
      c.leaves[at] = leaf;
      c.nodes[at] = node;
      c.kinds |= D.kind[node];
      addLeaf(c, leaf, callerOf(node) < 0);
    }
    f.kids = kids;
    sortKids(f);
  }

  function expand(f) {
    if (!f.kids) (st.reversed ? expandReversed : expandNormal)(f);
    return f.kids;
  }

  /* ---------------------------------------------------------------- values */

  function fmtNum(v) {
    const a = Math.abs(v);
    if (a >= 1e12) return (v / 1e12).toFixed(2) + 'T';
    if (a >= 1e9) return (v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  function fmtTime(ticks) {
    if (!D.tscHz) return fmtNum(ticks) + ' ticks';
    const s = ticks / D.tscHz, a = Math.abs(s);
    if (a >= 1) return s.toFixed(a >= 100 ? 1 : 3) + ' s';
    if (a >= 1e-3) return (s * 1e3).toFixed(a >= 0.1 ? 1 : 3) + ' ms';
    if (a >= 1e-6) return (s * 1e6).toFixed(a >= 1e-4 ? 1 : 3) + ' us';
    return (s * 1e9).toFixed(0) + ' ns';
  }

  function fmtMetric(m, v) {
    return D.metrics[m] === 'time' ? fmtTime(v) : fmtNum(v) + ' ' + D.metrics[m];
  }

  function pct(v, total) {
    return total > 0 ? (100 * v / total).toFixed(v / total < 0.001 ? 3 : 2) + '%' : '-';
  }

  /* ---------------------------------------------------------------- search */

  // Per method, whether its name matches; the matched share of the view:
  // the value of every stack with a matching frame, each counted once
  // (outermost matching nodes of the CCT), the same in both views.
  function runSearch() {
    const q = el('search').value, box = el('search');
    box.classList.remove('bad');
    st.match = null;
    st.matchInfo = null;
    if (q) {
      let test;
      if (el('regex').checked) {
        try {
          const re = new RegExp(q);
          test = (s) => re.test(s);
        } catch (e) {
          box.classList.add('bad');
          box.title = String(e.message || e);
        }
      } else {
        test = (s) => s.includes(q);
      }
      if (test) {
        const mm = new Uint8Array(D.mname.length);
        let any = 0;
        for (let m = 0; m < mm.length; m++) {
          if (test(st.sigs ? D.mname[m] : D.msimple[m])) {
            mm[m] = 1;
            any++;
          }
        }
        st.match = mm;
        const k = K(), value = new Float64Array(k), bvalue = new Float64Array(k);
        const [lo, hi] = selection();
        let openEnd = 0;
        for (let i = lo; i < hi; i++) {
          const m = D.M[i];
          if (i >= openEnd && m >= 0 && mm[m]) {
            for (let j = 0; j < k; j++) {
              value[j] += D.incl[j][i];
              if (D.base) bvalue[j] += D.base.incl[j][i];
            }
            openEnd = D.end[i];
          }
        }
        st.matchInfo = { methods: any, value, bvalue };
      }
    }
    showMatch();
    draw();
  }

  function showMatch() {
    const box = el('match'), info = st.matchInfo, m = st.metric;
    if (!info) {
      box.textContent = st.focus && st.focus !== st.root ? 'Zoomed: ' + frameName(st.focus) : '';
      return;
    }
    const tot = st.root.tot[m];
    box.innerHTML = 'Matched: <b>' + pct(info.value[m], tot) + '</b> of ' + esc(D.metrics[m]) + ' (' +
      esc(fmtMetric(m, info.value[m])) + ' of ' + esc(fmtMetric(m, tot)) + '), ' + info.methods +
      ' method' + (info.methods === 1 ? '' : 's') + (D.base ? '; baseline ' +
      pct(info.bvalue[m], st.root.btot[m]) + ' (' + esc(fmtMetric(m, info.bvalue[m])) + ')' : '');
  }

  /* ---------------------------------------------------------------- layout */

  let rows = [];        // rows[d]: rectangles {f, x, w, anc} in x order
  let width = 0, height = 0;

  function layout() {
    const t0 = performance.now();
    rows = [];
    const m = st.metric, focus = st.focus;
    const chain = [];
    for (let f = focus; f; f = f.parent) chain.unshift(f);
    for (const a of chain) rows.push([{ f: a, x: 0, w: width, anc: a !== focus }]);
    const stack = [[focus, 0, width]];
    while (stack.length) {
      const [f, x, w] = stack.pop();
      const total = size(f, m);
      if (!(total > 0)) continue;
      const scale = w / total;
      let cx = x;
      for (const c of expand(f)) {
        const cw = size(c, m) * scale;
        if (cw >= MIN_PX) {
          const d = c.depth;
          while (rows.length <= d) rows.push([]);
          rows[d].push({ f: c, x: cx, w: cw, anc: false });
          stack.push([c, cx, cw]);
        }
        cx += cw;
      }
    }
    for (const r of rows) r.sort((a, b) => a.x - b.x);
    T.layoutMs = performance.now() - t0;
    spacer.style.height = Math.max(rows.length * ROW + 4, stage.clientHeight) + 'px';
  }

  function rowY(d) {
    const full = Math.max(rows.length * ROW + 4, stage.clientHeight);
    return st.flame ? full - (d + 1) * ROW : d * ROW;
  }

  let charW = 6.6;

  // Differential colours: red where the run grew from the baseline, blue where
  // it shrank, deeper the larger the change against the larger of the two.
  const DIFF_STEPS = 12, GREW = [], SHRANK = [];
  for (let i = 0; i < DIFF_STEPS; i++) {
    GREW.push(i ? 'hsl(0,78%,' + (92 - i * 3.4).toFixed(1) + '%)' : 'hsl(0,0%,90%)');
    SHRANK.push(i ? 'hsl(215,78%,' + (92 - i * 3.4).toFixed(1) + '%)' : 'hsl(0,0%,90%)');
  }

  // The change of a frame, -1 (gone) .. 1 (new), in the metric shown; with
  // normalize, of its share of each run's total.
  function change(f) {
    const m = st.metric;
    let a = f.btot[m], b = f.tot[m];
    if (st.normalize) {
      const ta = st.root.btot[m], tb = st.root.tot[m];
      a = ta > 0 ? a / ta : 0;
      b = tb > 0 ? b / tb : 0;
    }
    const top = Math.max(a, b);
    return top > 0 ? (b - a) / top : 0;
  }

  function fillOf(r) {
    const f = r.f;
    if (f.key >= 0 && st.match && st.match[f.key]) return MATCH_FILL;
    if (D.base) {
      const x = change(f), step = Math.min(DIFF_STEPS - 1, Math.round(Math.abs(x) * (DIFF_STEPS - 1)));
      return (x >= 0 ? GREW : SHRANK)[step];
    }
    if (f.key < 0) return ROOT_FILL;
    return CLASSES[kindClass(f.kinds)].fill[D.mfill[f.key]];
  }

  function draw() {
    if (!D || !st.root) return;
    const t0 = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const vw = stage.clientWidth, vh = stage.clientHeight;
    if (canvas.width !== Math.round(vw * dpr) || canvas.height !== Math.round(vh * dpr)) {
      canvas.width = Math.round(vw * dpr);
      canvas.height = Math.round(vh * dpr);
      canvas.style.width = vw + 'px';
      canvas.style.height = vh + 'px';
    }
    const top = stage.scrollTop;
    canvas.style.top = top + 'px';
    ctx.setTransform(dpr, 0, 0, dpr, 0, -top * dpr);
    ctx.clearRect(0, top, vw, vh);
    ctx.font = FONT;
    ctx.textBaseline = 'middle';
    for (let d = 0; d < rows.length; d++) {
      const y = rowY(d);
      if (y + ROW < top || y > top + vh) continue;
      for (const r of rows[d]) {
        ctx.globalAlpha = r.anc ? 0.6 : 1;
        ctx.fillStyle = fillOf(r);
        ctx.fillRect(r.x, y, r.w > 2 ? r.w - 0.5 : r.w, ROW - 1);
        if (r.f.kinds & K_TRUNCATED) {
          // The frames below it are not in the trace: a bar on its outer side.
          ctx.fillStyle = TRUNC_MARK;
          ctx.fillRect(r.x, st.flame ? y + ROW - 4 : y, r.w > 2 ? r.w - 0.5 : r.w, 3);
        }
        if (r.w >= LABEL_PX) {
          const name = frameName(r.f), fit = Math.floor((r.w - 6) / charW);
          if (fit >= 2) {
            ctx.fillStyle = '#111';
            ctx.fillText(name.length <= fit ? name : name.slice(0, fit - 1) + '\u2026', r.x + 3,
                         y + ROW / 2);
          }
        }
      }
    }
    ctx.globalAlpha = 1;
    T.drawMs = performance.now() - t0;
  }

  function refresh() {
    if (!D) return;
    width = stage.clientWidth;
    layout();
    draw();
    const m = st.metric;
    el('stats').textContent = fmtMetric(m, st.root.tot[m]) + (D.tscHz ? '' : D.metrics[m] === 'time'
      ? ' (no TSC frequency recorded)' : '');
    showMatch();
  }

  /* ---------------------------------------------------------------- input */

  function rectAt(clientX, clientY) {
    const b = canvas.getBoundingClientRect();
    const x = clientX - b.left, y = clientY - b.top + stage.scrollTop;
    const full = Math.max(rows.length * ROW + 4, stage.clientHeight);
    const d = Math.floor(st.flame ? (full - y) / ROW : y / ROW);
    const row = rows[d];
    if (!row) return null;
    let lo = 0, hi = row.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, r = row[mid];
      if (x < r.x) hi = mid - 1;
      else if (x >= r.x + Math.max(r.w, 1)) lo = mid + 1;
      else return r;
    }
    return null;
  }

  function zoom(f) {
    st.focus = f;
    refresh();
  }

  function showTip(r, cx, cy) {
    if (!r) {
      tip.hidden = true;
      return;
    }
    const f = r.f, k = K();
    let html = '<div class="name">' + esc(frameName(f)) + '</div>';
    if (f.key >= 0) {
      html += '<div class="kind">' + esc(kindText(f.kinds)) +
        (f.kinds & K_TRUNCATED ? '; its callers are not in the trace (stack truncated)' : '') + '</div>';
    } else if (f.key !== ROOT_KEY) {
      html += '<div class="kind">thread; its own values ran outside every frame the trace shows</div>';
    }
    if (D.base) {
      html += '<table><tr><td></td><td>' + esc(D.base.title) + '</td><td>this run</td><td>change</td></tr>';
      for (let m = 0; m < k; m++) {
        const b = m === st.metric ? 'b' : 'span', d = f.tot[m] - f.btot[m];
        html += '<tr><td><' + b + '>' + esc(D.metrics[m]) + '</' + b + '></td><td>' +
          esc(fmtMetric(m, f.btot[m])) + '</td><td>' + esc(fmtMetric(m, f.tot[m])) + '</td><td>' +
          (d >= 0 ? '+' : '-') + esc(fmtMetric(m, Math.abs(d))) +
          (f.btot[m] > 0 ? ' (' + (d >= 0 ? '+' : '') + (100 * d / f.btot[m]).toFixed(1) + '%)' : '') +
          '</td></tr>';
      }
      tip.innerHTML = html + '</table>';
      tip.hidden = false;
      placeTip(cx, cy);
      return;
    }
    html += '<table><tr><td></td><td>total</td><td>of all</td><td>' + (st.reversed ? 'ends here' : 'self') + '</td></tr>';
    for (let m = 0; m < k; m++) {
      const b = m === st.metric ? 'b' : 'span';
      html += '<tr><td><' + b + '>' + esc(D.metrics[m]) + '</' + b + '></td><td>' + esc(fmtMetric(m, f.tot[m])) +
        '</td><td>' + pct(f.tot[m], st.root.tot[m]) + '</td><td>' + esc(fmtMetric(m, f.self[m])) + '</td></tr>';
    }
    html += '</table>';
    tip.innerHTML = html;
    tip.hidden = false;
    placeTip(cx, cy);
  }

  function placeTip(cx, cy) {
    const tw = tip.offsetWidth, th = tip.offsetHeight;
    tip.style.left = Math.max(4, Math.min(cx + 14, window.innerWidth - tw - 8)) + 'px';
    tip.style.top = (cy + 16 + th < window.innerHeight ? cy + 16 : Math.max(4, cy - th - 10)) + 'px';
  }

  canvas.addEventListener('mousemove', (e) => showTip(rectAt(e.clientX, e.clientY), e.clientX, e.clientY));
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (e) => {
    const r = rectAt(e.clientX, e.clientY);
    if (r && r.f !== st.focus) zoom(r.f);
  });
  stage.addEventListener('scroll', () => draw());
  window.addEventListener('resize', () => refresh());
  window.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && st.root) zoom(st.root);
  });
  el('reset').addEventListener('click', () => st.root && zoom(st.root));
  el('metric').addEventListener('change', (e) => {
    st.metric = Number(e.target.value);
    if (!(size(st.focus, st.metric) > 0)) st.focus = st.root;
    refresh();
  });
  function rebuild() {
    buildRoot();
    runSearch();
    refresh();
    if (st.flame) stage.scrollTop = stage.scrollHeight;
  }
  el('thread').addEventListener('change', (e) => {
    st.thread = e.target.value;
    rebuild();
  });
  el('reversed').addEventListener('change', (e) => {
    st.reversed = e.target.checked;
    rebuild();
  });
  el('layout').addEventListener('change', (e) => {
    st.flame = e.target.value === 'flame';
    refresh();
    stage.scrollTop = st.flame ? stage.scrollHeight : 0;
  });
  el('sigs').addEventListener('change', (e) => {
    st.sigs = e.target.checked;
    runSearch();
    refresh();
  });
  let searchTimer = 0;
  el('search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 120);
  });
  el('regex').addEventListener('change', runSearch);
  el('width').addEventListener('change', (e) => {
    st.widthBase = e.target.value === 'base';
    if (!(size(st.focus, st.metric) > 0)) st.focus = st.root;
    refresh();
  });
  el('normalize').addEventListener('change', (e) => {
    st.normalize = e.target.checked;
    draw();
  });
  el('file').addEventListener('change', (e) => {
    const file = e.target.files && e.target.files[0];
    if (!file) return;
    file.text().then((txt) => start(JSON.parse(txt))).catch((err) => fail(err));
  });

  /* ---------------------------------------------------------------- start */

  function fail(err) {
    const msg = el('msg');
    msg.textContent = String(err && err.message ? err.message : err);
    msg.hidden = false;
    api.error = msg.textContent;
  }

  function fillControls() {
    const metric = el('metric');
    metric.innerHTML = '';
    D.metrics.forEach((name, m) => {
      const o = document.createElement('option');
      o.value = String(m);
      o.textContent = name === 'time' && D.tscHz ? 'time (' + (D.tscHz / 1e9).toFixed(3) + ' GHz TSC)'
                    : name === 'time' ? 'time (TSC ticks)' : name;
      metric.appendChild(o);
    });
    // bytecodes when the flow has them (as ptdecode hot), else time, else the first
    const pick = (name) => D.metrics.indexOf(name);
    const has = (m) => m >= 0 && D.incl[m][0] > 0;
    st.metric = [pick('bytecodes'), pick('time'), 0].find((m) => m >= 0 && (has(m) || m === 0));
    metric.value = String(st.metric);
    const thread = el('thread');
    thread.innerHTML = '';
    const add = (value, text) => {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      thread.appendChild(o);
    };
    add('all', 'All threads, merged');
    add('each', 'All threads, by thread');
    const m = st.metric, all = D.incl[m][0];
    [...D.threads].sort((a, b) => D.incl[m][b] - D.incl[m][a])
      .forEach((t) => add(String(t), threadLabel(t) + ' ' + pct(D.incl[m][t], all)));
    st.thread = 'all';
    thread.value = 'all';
    el('diffctl').hidden = !D.base;
    thread.parentElement.hidden = !D.threads.length;   // a diff merges the threads
    if (D.base) {
      el('width').options[0].textContent = 'this run';
      el('width').options[1].textContent = D.base.title;
      el('width').value = 'run';
      st.widthBase = false;
      el('legend').innerHTML = '<span><i style="background:' + GREW[8] + '"></i>grew from ' + esc(D.base.title) +
        '</span><span><i style="background:' + SHRANK[8] + '"></i>shrank</span><span><i style="background:' +
        GREW[0] + '"></i>unchanged</span><span><i style="background:' + MATCH_FILL + '"></i>search match</span>' +
        '<span>Width: one run\'s values; colour: the change (of each run\'s share with Normalize).</span>';
      return;
    }
    el('legend').innerHTML = CLASSES.map((c) => '<span><i style="background:' + c.fill[2] + '"></i>' +
      esc(c.label) + '</span>').join('') +
      '<span><i style="background:' + TRUNC_MARK + '"></i>stack truncated (callers not in the trace)</span>' +
      '<span><i style="background:' + MATCH_FILL + '"></i>search match</span>' +
      '<span>Click a frame to zoom, Escape to zoom out.</span>';
  }

  function start(doc) {
    const t0 = performance.now();
    el('msg').hidden = true;
    api.error = null;
    try {
      load(doc);
    } catch (err) {
      fail(err);
      return;
    }
    if (D.title) el('title').textContent = D.title;
    charW = (() => {
      ctx.font = FONT;
      return ctx.measureText('abcdefghijklmnopqrstuvwxyz').width / 26 || 6.6;
    })();
    fillControls();
    buildRoot();
    runSearch();
    refresh();
    T.loadMs = performance.now() - t0;
    api.ready = true;
  }

  // For tests and scripts: what is on screen, in numbers.
  const api = {
    ready: false,
    error: null,
    timings: () => ({ ...T }),
    metrics: () => D.metrics.slice(),
    metric: () => D.metrics[st.metric],
    tscHz: () => D.tscHz,
    differential: () => !!D.base,
    change: (names) => {
      let f = st.root;
      for (const name of names) {
        f = expand(f).find((c) => frameName(c) === name);
        if (!f) return null;
      }
      return change(f);
    },
    total: (m) => st.root.tot[m === undefined ? st.metric : D.metrics.indexOf(m)],
    // the nodes' own values outside every method frame (thread roots)
    unattributed: (m) => {
      const j = m === undefined ? st.metric : D.metrics.indexOf(m);
      const [lo, hi] = selection();
      let v = 0;
      for (let i = lo; i < hi; i++) if (D.M[i] < 0) v += D.self[j][i];
      return v;
    },
    focus: () => frameName(st.focus),
    matched: () => st.matchInfo && { methods: st.matchInfo.methods,
                                     value: Object.fromEntries(D.metrics.map((n, m) => [n, st.matchInfo.value[m]])),
                                     share: st.matchInfo.value[st.metric] / st.root.tot[st.metric] },
    // every laid-out frame: name, depth, its box in client coordinates, values
    frames: () => {
      const b = canvas.getBoundingClientRect(), out = [];
      rows.forEach((row, d) => row.forEach((r) => {
        const y = rowY(d) - stage.scrollTop;
        const path = [];
        for (let f = r.f; f; f = f.parent) path.unshift(frameName(f));
        out.push({ name: frameName(r.f), path, depth: d, ancestor: r.anc, x: b.left + r.x, w: r.w,
                   y: b.top + y, h: ROW - 1, visible: y + ROW > 0 && y < stage.clientHeight,
                   matched: !!(r.f.key >= 0 && st.match && st.match[r.f.key]), kinds: kindText(r.f.kinds),
                   truncated: !!(r.f.kinds & K_TRUNCATED),
                   value: Object.fromEntries(D.metrics.map((n, m) => [n, r.f.tot[m]])),
                   base: D.base ? Object.fromEntries(D.metrics.map((n, m) => [n, r.f.btot[m]])) : null,
                   self: Object.fromEntries(D.metrics.map((n, m) => [n, r.f.self[m]])) });
      }));
      return out;
    },
    // the children of the frame reached from the root by these names, drawn or not
    children: (names) => {
      let f = st.root;
      for (const name of names) {
        f = expand(f).find((c) => frameName(c) === name);
        if (!f) return null;
      }
      return expand(f).map((c) => ({ name: frameName(c), kinds: kindText(c.kinds),
                                     value: Object.fromEntries(D.metrics.map((n, m) => [n, c.tot[m]])),
                                     base: D.base ? Object.fromEntries(D.metrics.map((n, m) => [n, c.btot[m]])) : null }));
    },
    redraw: () => {
      const t0 = performance.now();
      refresh();
      return performance.now() - t0;
    },
  };
  window.jptFlame = api;

  const data = el('cct').textContent.trim();
  if (!data || data.startsWith('@')) {   // the template itself, never filled
    fail('No profile in this page: open a cct-json file (ptdecode export --format cct-json).');
  } else {
    try {
      start(JSON.parse(data));
    } catch (err) {
      fail(err);
    }
  }
})();
