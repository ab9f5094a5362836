#!/usr/bin/env python3
"""Synthetic calling context trees in the cct-json format.

    gen_cct.py N OUT.json [--seed S] [--threads T] [--recursion P]
    gen_cct.py --example recursion OUT.json

N nodes (including the merged root and the per-thread roots), in preorder.
Subtree sizes are split unevenly among a random number of distinct callees
(chains, small and wide fan-outs), which gives a skewed, deep tree like a real
CCT. Callees come from a per-method callee list (popular utility methods are
shared); with probability P a callee is a method already on the calling
context (direct or indirect recursion). calls, bytecodes (inclusive and self)
and time (inclusive and self) are consistent: inclusive = self + callees.

--example recursion writes a small hand-made tree for exact checks:
  all threads > main > A > B > A > B > C, and A > C; folding recursion merges
  the inner A and B into the outer ones: 8 nodes become 6.
"""
import argparse
import json
import math
import random


def method_table(rng, count):
    methods = []
    pkgs = ['org/acme/app', 'org/acme/util', 'org/acme/io', 'java/lang', 'java/util',
            'java/util/concurrent', 'com/example/parse', 'com/example/model']
    nclasses = max(4, count // 8)
    classes = ['%s/%s%d' % (pkgs[c % len(pkgs)], rng.choice(
        ['Parser', 'Node', 'Visitor', 'Buffer', 'Map', 'Task', 'Engine', 'Table']), c)
        for c in range(nclasses)]
    names = ['run', 'visit', 'get', 'put', 'hashCode', 'equals', 'parse', 'eval', 'next',
             'read', 'write', 'compute', 'apply', 'accept', 'resolve', 'append']
    sigs = ['()V', '()I', '(I)I', '(Ljava/lang/Object;)Z', '(II)V', '([BII)I',
            '(Ljava/lang/String;)Ljava/lang/Object;']
    for m in range(count):
        methods.append({'class': classes[m % nclasses],
                        'name': '%s%d' % (names[m % len(names)], m // len(names)),
                        'sig': sigs[m % len(sigs)]})
    return methods


def zipf_pick(rng, count):
    # Low indices are popular (shared utility methods).
    return min(count - 1, int(count * rng.random() ** 2.5))


def fanout(rng):
    r = rng.random()
    if r < 0.40:
        return 1
    if r < 0.78:
        return rng.randint(2, 4)
    if r < 0.96:
        return rng.randint(5, 12)
    return rng.randint(13, 80)


def split(rng, total, k):
    """total nodes over k children, each at least 1, heavy-tailed."""
    weights = [rng.paretovariate(1.1) for _ in range(k)]
    s = sum(weights)
    rest = total - k
    parts = [1 + int(rest * w / s) for w in weights]
    parts[max(range(k), key=lambda j: weights[j])] += total - sum(parts)
    return parts


def generate(n, seed, threads, recursion):
    rng = random.Random(seed)
    nmeth = max(60, min(30000, n // 150))
    methods = method_table(rng, nmeth)
    callees = []
    for m in range(nmeth):
        lst = list({zipf_pick(rng, nmeth) for _ in range(rng.randint(2, 14))})
        if rng.random() < recursion:
            lst.append(m)  # direct recursion
        callees.append(lst)
    cost = [rng.randint(3, 200) for _ in range(nmeth)]

    parent, method, calls = [-1], [-1], [0]
    labels = {'0': 'all threads'}
    threads = max(1, min(threads, n - 1))
    budgets = split(rng, n - 1, threads) if n > 1 else []
    # DFS stack of (parent id, method, subtree size, calls); ids in preorder.
    stack = []
    for t in reversed(range(len(budgets))):
        stack.append((0, -1, budgets[t], 1, t))
    while stack:
        p, m, size, c, tno = stack.pop()
        u = len(parent)
        parent.append(p)
        method.append(m)
        calls.append(c)
        if m < 0:
            labels[str(u)] = 'main (tid %d)' % (4000 + tno) if tno == 0 else \
                'worker-%d (tid %d)' % (tno, 4000 + tno)
        rest = size - 1
        if rest <= 0:
            continue
        k = min(rest, fanout(rng))
        chosen = []
        seen = set()
        pool = callees[m] if m >= 0 else []
        if m < 0:
            chosen.append(rng.randrange(nmeth))
            seen.add(chosen[0])
        if m >= 0 and rng.random() < recursion:
            # Indirect recursion: call a method up the calling context.
            a = u
            for _ in range(rng.randint(1, 6)):
                if parent[a] <= 0 or method[parent[a]] < 0:
                    break
                a = parent[a]
            if method[a] >= 0 and method[a] not in seen:
                chosen.append(method[a])
                seen.add(method[a])
        tries = 0
        while len(chosen) < k and tries < 4 * k + 8:
            tries += 1
            cm = rng.choice(pool) if pool and rng.random() < 0.7 else zipf_pick(rng, nmeth)
            if cm not in seen:
                seen.add(cm)
                chosen.append(cm)
        if not chosen:
            continue
        parts = split(rng, rest, len(chosen))
        for cm, sz in reversed(list(zip(chosen, parts))):
            cc = max(1, min(10 ** 6, round(c * math.exp(rng.gauss(0.0, 0.6)))))
            stack.append((u, cm, sz, cc, tno))
    total = len(parent)
    self_bc = [0] * total
    self_time = [0] * total
    for i in range(total):
        if method[i] >= 0:
            self_bc[i] = calls[i] * cost[method[i]]
            self_time[i] = int(self_bc[i] * 2.5 * (0.5 + rng.random()))
    bc = list(self_bc)
    tm = list(self_time)
    for i in range(total - 1, 0, -1):
        bc[parent[i]] += bc[i]
        tm[parent[i]] += tm[i]
    return {'methods': methods, 'parent': parent, 'method': method, 'calls': calls,
            'bytecodes': bc, 'self_bytecodes': self_bc, 'time': tm, 'self_time': self_time,
            'labels': labels}


def example_recursion():
    # 0 all threads, 1 main thread, 2 A, 3 B, 4 A, 5 B, 6 C (under 5), 7 C (under 2)
    parent = [-1, 0, 1, 2, 3, 4, 5, 2]
    method = [-1, -1, 0, 1, 0, 1, 2, 2]
    calls = [0, 1, 1, 2, 3, 4, 5, 6]
    self_bc = [0, 0, 10, 20, 30, 40, 50, 60]
    bc = list(self_bc)
    for i in range(len(parent) - 1, 0, -1):
        bc[parent[i]] += bc[i]
    methods = [{'class': 'demo/Rec', 'name': n, 'sig': '()V'} for n in ('a', 'b', 'c')]
    return {'methods': methods, 'parent': parent, 'method': method, 'calls': calls,
            'bytecodes': bc, 'self_bytecodes': self_bc, 'time': list(bc),
            'self_time': list(self_bc), 'labels': {'0': 'all threads', '1': 'main (tid 1)'}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('n', nargs='?', type=int)
    ap.add_argument('out')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--threads', type=int, default=4)
    ap.add_argument('--recursion', type=float, default=0.08)
    ap.add_argument('--example', choices=['recursion'])
    a = ap.parse_intermixed_args()
    if a.example:
        g = example_recursion()
        title = 'recursion example'
    else:
        if not a.n or a.n < 1:
            ap.error('N must be positive')
        g = generate(a.n, a.seed, a.threads, a.recursion)
        title = 'synthetic CCT, %d nodes' % a.n
    doc = {'format': 'jpt-cct', 'version': 1, 'title': title,
           'metrics': ['calls', 'bytecodes', 'time'], 'methods': g['methods'],
           'nodes': {k: g[k] for k in ('parent', 'method', 'calls', 'bytecodes',
                                       'self_bytecodes', 'time', 'self_time')},
           'labels': g['labels']}
    with open(a.out, 'w', encoding='utf-8') as f:
        json.dump(doc, f, separators=(',', ':'))


if __name__ == '__main__':
    main()
