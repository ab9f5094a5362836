/* Calling Context Ring Chart: renders a calling context tree (cct-json,
 * {"format":"jpt-cct","version":1}) as concentric rings on a 2D canvas.
 *
 * Data: typed arrays per node (parent, method, one self and one aggregated
 * value per metric) and a children index (CSR) built once per tree. Derived
 * trees (recursion folded, all contexts of one method, per-method list) are
 * built on demand in O(nodes) and cached.
 *
 * Layout is breadth-first, ring by ring, from the current root and only down
 * to the depth limit. A child whose angle would be under MIN_PX pixels of arc
 * even at the outer edge is merged with its tiny neighbours into one
 * aggregate segment and not expanded, so the work per redraw is bounded by
 * what can be seen, not by the size of the tree. Segments are filled in one
 * Path2D per colour; segments narrower than LINE_PX are drawn as lines. */
(function () {
  'use strict';

  const TAU = Math.PI * 2;
  const MIN_PX = 0.5;      // narrower than this at the outer edge: aggregated
  const LINE_PX = 1.5;     // narrower than this: a radial line
  const N_HUES = 18;
  const GREY = 2 * N_HUES; // thread roots and the merged root
  const AGG = GREY + 1;    // aggregated small segments
  const PALETTE = [];
  for (let h = 0; h < N_HUES; h++) {
    PALETTE.push('hsl(' + (h * 20) + ',62%,63%)', 'hsl(' + (h * 20 + 9) + ',48%,74%)');
  }
  PALETTE.push('hsl(215,12%,78%)', 'hsl(0,0%,86%)');

  const el = (id) => document.getElementById(id);
  const canvas = el('chart'), overlay = el('overlay'), stage = el('stage'), tip = el('tip');
  const ctx = canvas.getContext('2d');
  const octx = overlay.getContext('2d');

  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) {
      h ^= s.charCodeAt(i);
      h = Math.imul(h, 16777619);
    }
    return h >>> 0;
  }

  function fmt(v) {
    if (!isFinite(v)) return String(v);
    const a = Math.abs(v);
    if (a >= 1e12) return (v / 1e12).toFixed(2) + 'T';
    if (a >= 1e9) return (v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  // A value of metric k: time in s / ms / us with the trace's TSC frequency.
  function fmtMetric(k, v) {
    if (D.metrics[k] !== 'time') return fmt(v);
    if (!D.tscHz) return fmt(v) + ' ticks';
    const s = v / D.tscHz, a = Math.abs(s);
    if (a >= 1) return s.toFixed(3) + ' s';
    if (a >= 1e-3) return (s * 1e3).toFixed(3) + ' ms';
    if (a >= 1e-6) return (s * 1e6).toFixed(3) + ' us';
    return (s * 1e9).toFixed(0) + ' ns';
  }

  const PRIM = { B: 'byte', C: 'char', D: 'double', F: 'float', I: 'int', J: 'long', S: 'short',
                 Z: 'boolean', V: 'void' };

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

  function pct(v, total) {
    return total > 0 ? (100 * v / total).toFixed(v / total < 0.001 ? 3 : 1) + '%' : '-';
  }

  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
  }

  function grow(a, n) {
    const b = new a.constructor(n);
    b.set(a.subarray(0, Math.min(a.length, n)));
    return b;
  }

  /* ---------------------------------------------------------------- data */

  let D = null;          // the loaded document
  const cache = { fold: null, methods: null, callee: new Map() };
  const st = { view: 'cct', sizing: 'angle', metric: 0, depth: 8, fold: false,
               tree: null, root: 0, hist: [] };

  // Children index: kids[first[u] .. first[u+1]) are u's children, in order.
  function index(t) {
    const n = t.n, P = t.parent;
    const first = new Int32Array(n + 1), kids = new Int32Array(Math.max(n - 1, 0));
    for (let i = 1; i < n; i++) first[P[i] + 1]++;
    for (let i = 0; i < n; i++) first[i + 1] += first[i];
    const pos = first.slice(0, n);
    for (let i = 1; i < n; i++) kids[pos[P[i]]++] = i;
    t.first = first;
    t.kids = kids;
    return t;
  }

  // Needs parent[i] < i.
  function subtreeSum(P, self, n) {
    const inc = new Float64Array(n);
    inc.set(self.subarray(0, n));
    for (let i = n - 1; i > 0; i--) inc[P[i]] += inc[i];
    return inc;
  }

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
    const parent = Int32Array.from(nd.parent), method = Int32Array.from(nd.method);
    const methods = Array.isArray(doc.methods) ? doc.methods : [];
    if (parent[0] !== -1) throw new Error('cct-json: node 0 must be the root (parent -1)');
    for (let i = 1; i < n; i++) {
      if (!(parent[i] >= 0 && parent[i] < i)) {
        throw new Error('cct-json: nodes are not in preorder (node ' + i + ' has parent ' + parent[i] + ')');
      }
      if (method[i] >= methods.length) throw new Error('cct-json: node ' + i + ': no method ' + method[i]);
    }
    const metrics = [], self = [], incl = [], perNode = [];
    for (const k of (Array.isArray(doc.metrics) ? doc.metrics : [])) {
      if (!Array.isArray(nd[k]) || nd[k].length !== n) continue;
      metrics.push(k);
      const sk = nd['self_' + k];
      if (Array.isArray(sk) && sk.length === n) {
        // An inclusive metric with its exclusive part.
        self.push(Float64Array.from(sk));
        incl.push(Float64Array.from(nd[k]));
        perNode.push(false);
      } else {
        // A per-node count (calls): aggregated over the subtree.
        const s = Float64Array.from(nd[k]);
        self.push(s);
        incl.push(subtreeSum(parent, s, n));
        perNode.push(true);
      }
    }
    const labels = new Map();
    if (doc.labels && typeof doc.labels === 'object') {
      for (const k of Object.keys(doc.labels)) labels.set(Number(k), String(doc.labels[k]));
    }
    const mname = [], mshort = [], msig = [], mcolor = new Uint8Array(methods.length);
    for (let m = 0; m < methods.length; m++) {
      const me = methods[m] || {};
      const cls = String(me.class || '?').replace(/\//g, '.');
      const nm = String(me.name || '?');
      mname.push(cls + '.' + nm);
      mshort.push(cls.slice(cls.lastIndexOf('.') + 1) + '.' + nm);
      msig.push(me.sig ? params(String(me.sig)) : '');
      mcolor[m] = (hash(cls) % N_HUES) * 2 + (hash(nm) & 1);
    }
    const hz = Number(doc.tsc_hz);
    D = { title: String(doc.title || ''), metrics, perNode, methods, mname, mshort, msig, mcolor,
          tscHz: hz > 0 ? hz : 0,
          base: index({ kind: 'cct', n, parent, method, self, incl, labels, rep: null, map: null }) };
    cache.fold = null;
    cache.methods = null;
    cache.callee.clear();
  }

  /* The CCT rebuilt from the base tree. rootMethod >= 0: the merged subtrees
   * of the outermost calls of that method (all its contexts aggregated);
   * rootMethod < 0: the whole tree. fold: a call to a method already on the
   * calling context is merged into that ancestor (metrics summed, children
   * merged by method). Aggregated values are recomputed from self values. */
  function derive(rootMethod, fold) {
    const B = D.base, n = B.n, P = B.parent, M = B.method, K = D.metrics.length;
    const W = D.methods.length + 1;
    let cap = 1 << 15, cnt = 0;
    let np = new Int32Array(cap), nm = new Int32Array(cap), rep = new Int32Array(cap);
    let selfs = D.metrics.map(() => new Float64Array(cap));
    const add = (p, m, r) => {
      if (cnt === cap) {
        cap *= 2;
        np = grow(np, cap); nm = grow(nm, cap); rep = grow(rep, cap);
        selfs = selfs.map((a) => grow(a, cap));
      }
      np[cnt] = p; nm[cnt] = m; rep[cnt] = r;
      return cnt++;
    };
    const map = new Int32Array(n).fill(-1);
    const onPath = new Int32Array(D.methods.length).fill(-1);
    const setBy = new Uint8Array(n);
    const stack = new Int32Array(n);
    let sp = 0;
    const keys = new Map();
    if (rootMethod >= 0) {
      add(-1, rootMethod, -1);
      if (fold) onPath[rootMethod] = 0;
    }
    for (let i = 0; i < n; i++) {
      const pi = P[i], m = M[i];
      if (fold) {
        while (sp > 0 && stack[sp - 1] !== pi) {
          const q = stack[--sp];
          if (setBy[q]) onPath[M[q]] = -1;
        }
        stack[sp++] = i;
      }
      const p = i === 0 ? -1 : map[pi];
      let c;
      if (p < 0) {
        if (rootMethod < 0) {
          if (i !== 0) continue;
          c = add(-1, m, 0);
        } else if (m === rootMethod) {
          c = 0;
        } else {
          continue;
        }
      } else if (fold && m >= 0 && onPath[m] >= 0) {
        c = onPath[m];
      } else {
        const key = m >= 0 ? p * W + m : -(i + 1);
        c = keys.get(key);
        if (c === undefined) {
          c = add(p, m, i);
          keys.set(key, c);
        }
        if (fold && m >= 0) {
          onPath[m] = c;
          setBy[i] = 1;
        }
      }
      map[i] = c;
      if (rep[c] < 0) rep[c] = i;
      for (let k = 0; k < K; k++) selfs[k][c] += B.self[k][i];
    }
    if (cnt === 0) add(-1, rootMethod, -1);
    const parent = np.slice(0, cnt), method = nm.slice(0, cnt);
    const self = selfs.map((a) => a.slice(0, cnt));
    const incl = self.map((a) => subtreeSum(parent, a, cnt));
    const labels = new Map();
    for (let c = 0; c < cnt; c++) {
      if (method[c] < 0) labels.set(c, B.labels.get(rep[c]) || (c === 0 ? 'all threads' : 'thread'));
    }
    if (rootMethod >= 0) labels.set(0, D.mname[rootMethod] + ' (all contexts)');
    return index({ kind: rootMethod >= 0 ? 'callee' : 'cct', rootMethod, fold, n: cnt, parent,
                   method, self, incl, labels, rep: rep.slice(0, cnt), map });
  }

  /* Per-method view: one node per method under a synthetic root. Self values
   * are summed over all contexts of the method; aggregated values over its
   * outermost contexts only (a recursive call is already inside its caller). */
  function buildMethods() {
    const B = D.base, n = B.n, P = B.parent, M = B.method, K = D.metrics.length;
    const nmeth = D.methods.length;
    const onCount = new Int32Array(nmeth), contexts = new Int32Array(nmeth);
    const mself = D.metrics.map(() => new Float64Array(nmeth));
    const mincl = D.metrics.map(() => new Float64Array(nmeth));
    const stack = new Int32Array(n);
    let sp = 0;
    for (let i = 0; i < n; i++) {
      while (sp > 0 && stack[sp - 1] !== P[i]) {
        const q = M[stack[--sp]];
        if (q >= 0) onCount[q]--;
      }
      stack[sp++] = i;
      const m = M[i];
      if (m < 0) continue;
      contexts[m]++;
      for (let k = 0; k < K; k++) {
        mself[k][m] += B.self[k][i];
        if (onCount[m] === 0) mincl[k][m] += B.incl[k][i];
      }
      onCount[m]++;
    }
    const list = [];
    for (let m = 0; m < nmeth; m++) if (contexts[m] > 0) list.push(m);
    if (K > 0) {
      const v = mincl[st.metric];
      list.sort((a, b) => v[b] - v[a]);
    }
    const cnt = list.length + 1;
    const parent = new Int32Array(cnt), method = new Int32Array(cnt), ctxs = new Int32Array(cnt);
    parent[0] = -1;
    method[0] = -1;
    const self = D.metrics.map(() => new Float64Array(cnt));
    const incl = D.metrics.map(() => new Float64Array(cnt));
    list.forEach((m, j) => {
      method[j + 1] = m;
      ctxs[j + 1] = contexts[m];
      for (let k = 0; k < K; k++) {
        self[k][j + 1] = mself[k][m];
        incl[k][j + 1] = mincl[k][m];
        incl[k][0] += mincl[k][m];
      }
    });
    return index({ kind: 'methods', n: cnt, parent, method, self, incl, contexts: ctxs,
                   labels: new Map([[0, 'all methods']]), rep: null, map: null });
  }

  function cctTree() {
    if (!st.fold) return D.base;
    return cache.fold || (cache.fold = derive(-1, true));
  }

  function methodsTree() {
    return cache.methods || (cache.methods = buildMethods());
  }

  function calleeTree(m) {
    const key = m + (st.fold ? 'f' : '');
    let t = cache.callee.get(key);
    if (!t) {
      t = derive(m, st.fold);
      if (cache.callee.size >= 8) cache.callee.delete(cache.callee.keys().next().value);
      cache.callee.set(key, t);
    }
    return t;
  }

  function nodeName(t, u) {
    const m = t.method[u];
    if (t.labels.has(u)) return t.labels.get(u);
    return m >= 0 ? D.mname[m] : 'thread';
  }

  function shortName(t, u) {
    const m = t.method[u];
    if (u === 0 && t.kind === 'callee') return D.mshort[m] + ' (all)';
    if (t.labels.has(u)) return t.labels.get(u);
    return m >= 0 ? D.mshort[m] : 'thread';
  }

  function pathOf(t, u) {
    const p = [];
    for (let v = u; v >= 0; v = t.parent[v]) p.push(v);
    return p.reverse();
  }

  /* -------------------------------------------------------------- layout */

  const S = { cap: 0, n: 0, node: null, a0: null, span: null, agg: null,
              ring: [0], radii: [], depth: 0, cx: 0, cy: 0, R: 100, w: 0, h: 0 };

  function push(node, a0, span, agg) {
    if (S.n === S.cap) {
      S.cap = Math.max(4096, S.cap * 2);
      S.node = S.node ? grow(S.node, S.cap) : new Int32Array(S.cap);
      S.a0 = S.a0 ? grow(S.a0, S.cap) : new Float64Array(S.cap);
      S.span = S.span ? grow(S.span, S.cap) : new Float64Array(S.cap);
      S.agg = S.agg ? grow(S.agg, S.cap) : new Int32Array(S.cap);
    }
    S.node[S.n] = node;
    S.a0[S.n] = a0;
    S.span[S.n] = span;
    S.agg[S.n] = agg;
    S.n++;
  }

  function layout() {
    const t = st.tree, first = t.first, kids = t.kids;
    const v = D.metrics.length ? t.incl[st.metric] : null;
    const equal = st.sizing === 'equal' || !v;
    const minSpan = MIN_PX / S.R;
    S.n = 0;
    S.ring = [0];
    push(st.root, 0, TAU, 0);
    S.ring.push(S.n);
    for (let d = 1; d <= st.depth; d++) {
      const from = S.ring[d - 1], to = S.ring[d];
      for (let s = from; s < to; s++) {
        if (S.agg[s]) continue;
        const u = S.node[s], f = first[u], e = first[u + 1];
        if (f === e) continue;
        let a = S.a0[s];
        const span = S.span[s];
        if (equal) {
          const each = span / (e - f);
          if (each < minSpan) {
            push(u, a, span, e - f);
            continue;
          }
          for (let j = f; j < e; j++, a += each) push(kids[j], a, each, 0);
          continue;
        }
        const scale = v[u] > 0 ? span / v[u] : 0;
        let runA = 0, runSpan = 0, runN = 0;
        for (let j = f; j < e; j++) {
          const c = kids[j], w = v[c] * scale;
          if (w < minSpan) {
            if (runN === 0) runA = a;
            runSpan += w;
            runN++;
          } else {
            if (runN) {
              if (runSpan > 0) push(u, runA, runSpan, runN);
              runN = 0;
              runSpan = 0;
            }
            push(c, a, w, 0);
          }
          a += w;
        }
        if (runN && runSpan > 0) push(u, runA, runSpan, runN);
      }
      if (S.n === to) break;
      S.ring.push(S.n);
    }
    S.depth = S.ring.length - 2;
    // Ring radii: equal widths, or (area sizing) equal areas, so that with
    // angle ~ metric the area of a segment is ~ metric:
    // r_i = sqrt(r_{i-1}^2 + K/pi), K = pi R^2 / (depth + 1).
    const De = S.depth;
    S.radii = [];
    for (let i = 0; i <= De; i++) {
      S.radii.push(st.sizing === 'area' ? S.R * Math.sqrt((i + 1) / (De + 1)) : S.R * (i + 1) / (De + 1));
    }
  }

  /* ---------------------------------------------------------------- draw */

  function colorOf(t, u) {
    const m = t.method[u];
    return m >= 0 ? D.mcolor[m] : GREY;
  }

  function draw() {
    const t = st.tree, dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, S.w, S.h);
    const cx = S.cx, cy = S.cy;
    const paths = new Array(PALETTE.length).fill(null);
    const lines = new Path2D();
    let nlines = 0;
    const labels = [];
    for (let d = 1; d <= S.depth; d++) {
      const rout = S.radii[d], rin = S.radii[d - 1] + 1;
      const from = S.ring[d], to = S.ring[d + 1];
      for (let s = from; s < to; s++) {
        const span = S.span[s], arc = span * rout;
        if (arc < MIN_PX) continue;
        const a0 = S.a0[s] - Math.PI / 2;
        if (arc < LINE_PX) {
          const mid = a0 + span / 2, c = Math.cos(mid), sn = Math.sin(mid);
          lines.moveTo(cx + c * rin, cy + sn * rin);
          lines.lineTo(cx + c * rout, cy + sn * rout);
          nlines++;
          continue;
        }
        const agg = S.agg[s] !== 0;
        const b = agg ? AGG : colorOf(t, S.node[s]);
        const p = paths[b] || (paths[b] = new Path2D());
        const g = arc >= 4 ? 0.5 / rout : 0;
        const gi = arc >= 4 ? 0.5 / rin : 0;
        const a1 = a0 + span;
        p.moveTo(cx + Math.cos(a0 + g) * rout, cy + Math.sin(a0 + g) * rout);
        p.arc(cx, cy, rout, a0 + g, a1 - g);
        p.arc(cx, cy, rin, a1 - gi, a0 + gi, true);
        p.closePath();
        if (!agg && arc >= 36 && rout - rin >= 11 && labels.length < 400) labels.push(s, d);
      }
    }
    for (let b = 0; b < paths.length; b++) {
      if (!paths[b]) continue;
      ctx.fillStyle = PALETTE[b];
      ctx.fill(paths[b]);
    }
    if (nlines) {
      ctx.strokeStyle = 'rgba(90,90,110,0.75)';
      ctx.lineWidth = 1;
      ctx.stroke(lines);
    }
    // Labels, written along the ring.
    ctx.fillStyle = '#111';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < labels.length; i += 2) {
      const s = labels[i], d = labels[i + 1];
      const rm = (S.radii[d - 1] + S.radii[d]) / 2, span = S.span[s];
      const mid = S.a0[s] + span / 2 - Math.PI / 2;
      const room = span * rm * 0.85;
      let text = shortName(t, S.node[s]);
      const fit = Math.floor(room / 6.2);
      if (fit < 3) continue;
      if (text.length > fit) text = text.slice(0, fit - 1) + '\u2026';
      ctx.save();
      ctx.translate(cx + Math.cos(mid) * rm, cy + Math.sin(mid) * rm);
      ctx.rotate(Math.sin(mid) > 0 ? mid - Math.PI / 2 : mid + Math.PI / 2);
      ctx.fillText(text, 0, 0);
      ctx.restore();
    }
    // The center: the current root.
    const r0 = S.radii[0];
    ctx.beginPath();
    ctx.arc(cx, cy, r0 - 1, 0, TAU);
    ctx.fillStyle = st.tree.method[st.root] >= 0 ? PALETTE[colorOf(t, st.root)] : '#e8ebf0';
    ctx.fill();
    ctx.strokeStyle = '#778';
    ctx.stroke();
    ctx.fillStyle = '#111';
    const fit = Math.max(4, Math.floor(r0 * 1.7 / 6.5));
    let name = shortName(t, st.root);
    if (name.length > fit) name = name.slice(0, fit - 1) + '\u2026';
    ctx.font = 'bold 12px system-ui, sans-serif';
    ctx.fillText(name, cx, cy - 8);
    ctx.font = '11px system-ui, sans-serif';
    if (D.metrics.length) {
      ctx.fillText(D.metrics[st.metric] + ' ' + fmtMetric(st.metric, t.incl[st.metric][st.root]), cx, cy + 7);
    }
    if (st.hist.length) {
      ctx.fillStyle = '#446';
      ctx.fillText('\u21b6 back', cx, cy + 21);
    }
  }

  /* ------------------------------------------------------------- control */

  let lastRedrawMs = 0, lastLayoutMs = 0;

  function redraw() {
    if (!D) return;
    const t0 = performance.now();
    layout();
    const t1 = performance.now();
    draw();
    const t2 = performance.now();
    lastLayoutMs = t1 - t0;
    lastRedrawMs = t2 - t0;
    clearHover();
    updateBars();
  }

  function updateBars() {
    const t = st.tree;
    el('stats').textContent = t.n.toLocaleString('en') + ' nodes \u00b7 ' + S.n.toLocaleString('en') +
      ' segments \u00b7 ' + S.depth + ' rings \u00b7 redraw ' + lastRedrawMs.toFixed(1) + ' ms';
    const names = pathOf(t, st.root).map((u) => nodeName(t, u));
    if (t.kind === 'methods' && st.root === 0) names[0] = 'all methods';
    el('path').textContent = names.join('  \u203a  ');
    el('back').disabled = st.hist.length === 0;
    el('depth').value = st.depth;
    el('view').value = st.view;
    el('sizing').value = st.sizing;
    el('fold').checked = st.fold;
    if (D.metrics.length) el('metric').value = String(st.metric);
  }

  function setRoot(u) {
    if (u === st.root || u < 0 || u >= st.tree.n) return;
    st.hist.push({ tree: st.tree, root: st.root });
    st.root = u;
    redraw();
  }

  function openMethod(m) {
    if (m < 0) return;
    st.hist.push({ tree: st.tree, root: st.root });
    st.tree = calleeTree(m);
    st.root = 0;
    redraw();
  }

  function back() {
    const h = st.hist.pop();
    if (!h) return false;
    st.tree = h.tree;
    st.root = h.root;
    redraw();
    return true;
  }

  function setDepth(n) {
    n = Math.max(1, Math.min(256, Math.round(Number(n)) || 1));
    if (n === st.depth) return;
    st.depth = n;
    redraw();
  }

  function setSizing(s) {
    if (!['equal', 'angle', 'area'].includes(s)) throw new Error('sizing: equal, angle or area');
    st.sizing = s;
    redraw();
  }

  function setMetric(k) {
    const i = typeof k === 'number' ? k : D.metrics.indexOf(k);
    if (i < 0 || i >= D.metrics.length) throw new Error('no metric ' + k);
    st.metric = i;
    redraw();
  }

  function setView(v) {
    if (v !== 'cct' && v !== 'methods') throw new Error("view: 'cct' or 'methods'");
    st.view = v;
    st.hist = [];
    st.tree = v === 'cct' ? cctTree() : methodsTree();
    st.root = 0;
    redraw();
  }

  function recursionElimination(on) {
    on = !!on;
    if (on === st.fold) return;
    const t = st.tree, root = st.root;
    st.fold = on;
    st.hist = [];
    if (t.kind === 'cct') {
      st.tree = cctTree();
      // Keep the root: base -> folded via the node map, folded -> base via
      // the first base node merged into it.
      st.root = on ? Math.max(0, st.tree.map[root]) : Math.max(0, t.rep[root]);
    } else if (t.kind === 'callee') {
      st.tree = calleeTree(t.rootMethod);
      st.root = 0;
    }
    redraw();
  }

  /* ---------------------------------------------------- mouse and sizing */

  function hit(x, y) {
    if (!D || !S.radii.length) return null;
    const dx = x - S.cx, dy = y - S.cy, r = Math.hypot(dx, dy);
    if (r <= S.radii[0]) return { center: true };
    let d = 1;
    while (d <= S.depth && r > S.radii[d]) d++;
    if (d > S.depth) return null;
    let a = Math.atan2(dy, dx) + Math.PI / 2;
    if (a < 0) a += TAU;
    let lo = S.ring[d], hi = S.ring[d + 1] - 1, s = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (S.a0[mid] <= a) {
        s = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    // Thin segments are easier to hit with a pixel of slack.
    const slack = 1.5 / r;
    if (s >= 0 && a <= S.a0[s] + S.span[s] + slack && S.span[s] * S.radii[d] >= MIN_PX) return { seg: s, ring: d };
    if (s + 1 < S.ring[d + 1] && S.a0[s + 1] - a <= slack) return { seg: s + 1, ring: d };
    return null;
  }

  function clickAt(x, y, shift) {
    const h = hit(x, y);
    if (!h) return;
    if (h.center) {
      back();
      return;
    }
    const t = st.tree, u = S.node[h.seg];
    if (S.agg[h.seg]) {
      setRoot(u);
    } else if (t.kind === 'methods' && u !== 0) {
      openMethod(t.method[u]);
    } else if (shift && t.method[u] >= 0) {
      openMethod(t.method[u]);
    } else {
      setRoot(u);
    }
  }

  let hoverSeg = -1;

  function clearHover() {
    hoverSeg = -1;
    octx.setTransform(1, 0, 0, 1, 0, 0);
    octx.clearRect(0, 0, overlay.width, overlay.height);
    tip.hidden = true;
  }

  function tooltipHtml(h) {
    const t = st.tree;
    if (h.center) {
      return '<b>' + esc(nodeName(t, st.root)) + '</b><br>' +
        (st.hist.length ? 'click: back to the previous root' : 'the root');
    }
    const s = h.seg, u = S.node[s], agg = S.agg[s];
    const v = D.metrics.length ? t.incl[st.metric] : null;
    let html = '';
    const path = pathOf(t, u);
    const lines = path.map((w, i) => (i === path.length - 1 && !agg ? '<b>' : '') +
      esc(' '.repeat(Math.min(i, 12)) + nodeName(t, w) + (t.method[w] >= 0 && w !== 0 ? D.msig[t.method[w]] : '')) +
      (i === path.length - 1 && !agg ? '</b>' : ''));
    const shown = lines.length > 24 ? lines.slice(0, 8).concat(['  \u2026 ' + (lines.length - 20) + ' more \u2026'], lines.slice(-12)) : lines;
    if (agg) {
      // With angle ~ metric every span is value * TAU / value(root).
      const byMetric = v && st.sizing !== 'equal';
      const sum = byMetric ? S.span[s] / TAU * v[st.root] : 0;
      html += '<b>' + agg.toLocaleString('en') + ' small callees</b> of ' + esc(nodeName(t, u)) +
        (byMetric ? ' (together ' + D.metrics[st.metric] + ' ' + fmtMetric(st.metric, sum) + ')' : '') +
        '<br>click: make their caller the root';
      html += '<div class="ctx">' + shown.join('\n') + '</div>';
      return html;
    }
    html += '<div class="ctx">' + shown.join('\n') + '</div><table>';
    const total = t.incl;
    for (let k = 0; k < D.metrics.length; k++) {
      const inc = t.incl[k][u], self = t.self[k][u];
      html += '<tr><td>' + esc(D.metrics[k]) + '</td>';
      if (D.perNode[k]) {
        html += '<td>' + fmtMetric(k, self) + ' here</td><td>' + fmtMetric(k, inc) + ' in subtree</td><td>' +
          pct(inc, total[k][st.root]) + ' of root</td>';
      } else {
        html += '<td>' + fmtMetric(k, inc) + ' total</td><td>' + fmtMetric(k, self) + ' self</td><td>' +
          pct(inc, total[k][st.root]) + ' of root</td>';
      }
      html += '</tr>';
    }
    html += '</table>';
    const nk = t.first[u + 1] - t.first[u];
    if (t.kind === 'methods' && u !== 0) {
      html += t.contexts[u].toLocaleString('en') + ' calling contexts \u00b7 click: aggregate them';
    } else {
      html += nk.toLocaleString('en') + ' callees' + (t.method[u] >= 0 ? ' \u00b7 shift-click: all contexts of this method' : '');
    }
    return html;
  }

  function hover(x, y) {
    const h = hit(x, y);
    const key = !h ? -1 : h.center ? -2 : h.seg;
    if (key !== hoverSeg) {
      hoverSeg = key;
      const dpr = window.devicePixelRatio || 1;
      octx.setTransform(dpr, 0, 0, dpr, 0, 0);
      octx.clearRect(0, 0, S.w, S.h);
      if (h && !h.center) {
        const s = h.seg, d = h.ring, a0 = S.a0[s] - Math.PI / 2, a1 = a0 + S.span[s];
        octx.beginPath();
        octx.arc(S.cx, S.cy, S.radii[d], a0, a1);
        octx.arc(S.cx, S.cy, S.radii[d - 1] + 1, a1, a0, true);
        octx.closePath();
        octx.lineWidth = 2;
        octx.strokeStyle = '#000';
        octx.stroke();
      }
      if (h) tip.innerHTML = tooltipHtml(h);
    }
    tip.hidden = !h;
    if (h) {
      const pad = 14, tw = tip.offsetWidth, th = tip.offsetHeight;
      tip.style.left = Math.max(0, x + pad + tw > S.w ? x - pad - tw : x + pad) + 'px';
      tip.style.top = Math.max(0, y + pad + th > S.h ? y - pad - th : y + pad) + 'px';
    }
  }

  function resize() {
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(200, stage.clientWidth), h = Math.max(200, stage.clientHeight);
    S.w = w;
    S.h = h;
    for (const c of [canvas, overlay]) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
      c.style.width = w + 'px';
      c.style.height = h + 'px';
    }
    S.cx = w / 2;
    S.cy = h / 2;
    S.R = Math.max(40, Math.min(w, h) / 2 - 8);
    redraw();
  }

  function local(ev) {
    const r = canvas.getBoundingClientRect();
    return [ev.clientX - r.left, ev.clientY - r.top];
  }

  canvas.addEventListener('click', (ev) => {
    const [x, y] = local(ev);
    clickAt(x, y, ev.shiftKey);
  });
  canvas.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    if (ev.deltaY !== 0) setDepth(st.depth + (ev.deltaY > 0 ? 1 : -1));
  }, { passive: false });
  let pending = null;
  canvas.addEventListener('mousemove', (ev) => {
    const first = pending === null;
    pending = local(ev);
    if (first) {
      requestAnimationFrame(() => {
        const p = pending;
        pending = null;
        if (p) hover(p[0], p[1]);
      });
    }
  });
  canvas.addEventListener('mouseleave', () => {
    pending = null;
    clearHover();
  });
  el('view').addEventListener('change', (ev) => setView(ev.target.value));
  el('sizing').addEventListener('change', (ev) => setSizing(ev.target.value));
  el('metric').addEventListener('change', (ev) => setMetric(Number(ev.target.value)));
  el('depth').addEventListener('change', (ev) => setDepth(ev.target.value));
  el('fold').addEventListener('change', (ev) => recursionElimination(ev.target.checked));
  el('back').addEventListener('click', () => back());
  window.addEventListener('resize', () => resize());
  window.addEventListener('keydown', (ev) => {
    if (ev.target.tagName === 'INPUT' || ev.target.tagName === 'SELECT') return;
    if (ev.key === 'Backspace' || ev.key === 'Escape') back();
    else if (ev.key === '+' || ev.key === '=') setDepth(st.depth + 1);
    else if (ev.key === '-') setDepth(st.depth - 1);
  });

  function message(text) {
    const m = el('msg');
    m.textContent = text;
    m.hidden = !text;
  }

  function start(doc, t0) {
    load(doc);
    const sel = el('metric');
    sel.textContent = '';
    D.metrics.forEach((k, i) => {
      const o = document.createElement('option');
      o.value = String(i);
      o.textContent = k;
      sel.appendChild(o);
    });
    const def = D.metrics.indexOf('bytecodes');
    st.metric = def >= 0 ? def : 0;
    if (!D.metrics.length) st.sizing = 'equal';
    if (D.title) {
      el('title').textContent = D.title;
      if (!document.title || document.title.startsWith('@')) document.title = D.title + ' \u2013 ring chart';
    }
    st.view = 'cct';
    st.fold = false;
    st.hist = [];
    st.tree = D.base;
    st.root = 0;
    message('');
    api.loadMs = performance.now() - (t0 === undefined ? performance.now() : t0);
    resize();
  }

  el('file').addEventListener('change', (ev) => {
    const f = ev.target.files && ev.target.files[0];
    if (!f) return;
    f.text().then((txt) => start(JSON.parse(txt))).catch((e) => message('cannot open ' + f.name + ': ' + e.message));
  });

  /* Hooks for scripted use and tests. */
  function segmentPoint(s) {
    const r = canvas.getBoundingClientRect();
    let d = 1;
    while (d <= S.depth && s >= S.ring[d + 1]) d++;
    const rm = (S.radii[d - 1] + S.radii[d]) / 2, mid = S.a0[s] + S.span[s] / 2 - Math.PI / 2;
    return { node: S.node[s], ring: d, span: S.span[s], aggregate: S.agg[s],
             x: r.left + S.cx + Math.cos(mid) * rm, y: r.top + S.cy + Math.sin(mid) * rm };
  }

  const api = {
    get lastRedrawMs() { return lastRedrawMs; },
    get lastLayoutMs() { return lastLayoutMs; },
    loadMs: 0,
    ready: false,
    error: null,
    root: () => st.root,
    view: () => st.view,
    treeKind: () => st.tree && st.tree.kind,
    nodeCount: () => st.tree ? st.tree.n : 0,
    depth: () => st.depth,
    rings: () => S.depth,
    segmentCount: () => S.n,
    historyLength: () => st.hist.length,
    sizing: () => st.sizing,
    metrics: () => D ? D.metrics.slice() : [],
    metric: () => D && D.metrics[st.metric],
    folded: () => st.fold,
    setDepth, setSizing, setMetric, setView, recursionElimination, back, setRoot,
    openMethod: (name) => openMethod(typeof name === 'number' ? name : D.mname.indexOf(name)),
    nodeName: (u) => nodeName(st.tree, u),
    contextOf: (u) => pathOf(st.tree, u).map((w) => nodeName(st.tree, w)),
    total: (u) => st.tree.incl[st.metric][u === undefined ? st.root : u],
    center: () => {
      const r = canvas.getBoundingClientRect();
      return { x: r.left + S.cx, y: r.top + S.cy };
    },
    // The widest non-aggregate segment of ring d (default 1), in page coordinates.
    largestSegment: (d) => {
      d = d || 1;
      if (d > S.depth) return null;
      let best = -1;
      for (let s = S.ring[d]; s < S.ring[d + 1]; s++) {
        if (!S.agg[s] && (best < 0 || S.span[s] > S.span[best])) best = s;
      }
      return best < 0 ? null : segmentPoint(best);
    },
    segmentOf: (u) => {
      for (let s = 1; s < S.n; s++) if (S.node[s] === u && !S.agg[s]) return segmentPoint(s);
      return null;
    },
    radii: () => S.radii.slice(),
    // Spans of the non-aggregate segments of ring d.
    ringSpans: (d) => {
      const r = [];
      for (let s = S.ring[d]; s < S.ring[d + 1]; s++) if (!S.agg[s]) r.push(S.span[s]);
      return r;
    },
    // The current metric of u's children.
    childTotals: (u) => {
      const t = st.tree, r = [];
      for (let j = t.first[u]; j < t.first[u + 1]; j++) r.push(t.incl[st.metric][t.kids[j]]);
      return r;
    },
    tooltipText: () => (tip.hidden ? '' : tip.textContent),
    // Forces the canvas to be rasterized (reads one pixel back).
    flush: () => ctx.getImageData(0, 0, 1, 1).data[3],
  };
  window.jptRing = api;

  try {
    const block = el('cct');
    const text = block ? block.textContent.trim() : '';
    if (!text || text.startsWith('@')) {
      message('No calling context tree embedded: open a cct-json file (ptdecode export --format cct-json).');
      resize();
    } else {
      const t0 = performance.now();
      start(JSON.parse(text), t0);
    }
    api.ready = true;
  } catch (e) {
    api.error = String(e && e.message || e);
    message('Cannot show the calling context tree: ' + api.error);
    console.error(e);
  }
})();
