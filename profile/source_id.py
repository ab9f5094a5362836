#!/usr/bin/env python3
"""Writes a C header defining FC_SOURCE_ID: a hash of the sources that decode
and reconstruct a flow, so that a flow cache made by other sources is stale.

  source_id.py OUTPUT.h SOURCE...
"""
import hashlib, os, sys

out, sources = sys.argv[1], sys.argv[2:]
h = hashlib.sha256()
for path in sorted(sources, key=lambda p: os.path.join(os.path.basename(os.path.dirname(p)),
                                                       os.path.basename(p))):
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    with open(path, 'rb') as f:
        data = f.read()
    h.update(name.encode() + b'\0' + len(data).to_bytes(8, 'little') + data)
text = ('/* Made by source_id.py: a hash of the decoding and reconstruction sources. */\n'
        f'#define FC_SOURCE_ID 0x{h.hexdigest()[:16]}ull\n')
try:
    with open(out) as f:
        if f.read() == text:
            sys.exit(0)
except OSError:
    pass
with open(out, 'w') as f:
    f.write(text)
