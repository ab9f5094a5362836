#!/usr/bin/env python3
"""Test double for `qemu-x86_64 [-E VAR=VALUE]... -plugin libptemu.so,...` in ptrec's tests.

It speaks the plugin's side of ptrec's protocol without emulating anything:
it parses the -plugin argument, answers `filter 0xLO 0xHI` on the ctl socket,
runs the program natively, forwards SIGINT/SIGTERM to it, and at exit writes a
small pt/tid-<pid>.pt with its .idx (one TRUNCATED record with 500 lost bytes)
into out=DIR, plus eval/fake-plugin.log listing what it was told.

Behaviour switches (environment):
  FAKE_PLUGIN_REFUSE=1   fail like qemu does on a plugin it cannot load
  FAKE_PLUGIN_REPLY=X    answer X instead of "ok" ("silent": never answer)
  FAKE_PT_BYTES=N        size of the .pt file (default 1000)
  FAKE_IDX=bad|partial   write a damaged .idx
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import threading


def main():
    args = sys.argv[1:]
    guest_env = dict(os.environ)
    while len(args) >= 2 and args[0] == "-E":   # qemu's "-E VAR=VALUE": the guest's environment
        k, _, v = args[1].partition("=")
        guest_env[k] = v
        args = args[2:]
    if len(args) < 3 or args[0] != "-plugin":
        print("fake-qemu: usage: [-E VAR=VALUE]... -plugin ARG PROGRAM [ARGS...]",
              file=sys.stderr)
        return 1
    parts = args[1].split(",")
    plugin, kv = parts[0], dict(p.split("=", 1) for p in parts[1:])
    if os.environ.get("FAKE_PLUGIN_REFUSE") or not os.path.isfile(plugin):
        print(f"qemu-x86_64: Could not load plugin {plugin}: fake refusal", file=sys.stderr)
        return 1
    out = kv["out"]
    log = [f"args {args[1]}"]
    ctl = socket.socket(fileno=int(kv["ctl"]))
    reply = os.environ.get("FAKE_PLUGIN_REPLY", "ok")

    def ctl_loop():
        for line in ctl.makefile("rb"):
            log.append("ctl " + line.decode(errors="replace").rstrip("\n"))
            if reply != "silent":
                ctl.sendall((reply + "\n").encode())

    threading.Thread(target=ctl_loop, daemon=True).start()

    hs = guest_env.get("JPT_HANDSHAKE_FD")
    child = subprocess.Popen(args[2:], pass_fds=[int(hs)] if hs else [], env=guest_env)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda sig, _f: child.send_signal(sig))
    while True:
        try:
            status = child.wait()
            break
        except InterruptedError:
            continue

    os.makedirs(os.path.join(out, "pt"), exist_ok=True)
    n = int(os.environ.get("FAKE_PT_BYTES", "1000"))
    base = os.path.join(out, "pt", f"tid-{child.pid}")
    with open(base + ".pt", "wb") as f:
        f.write(b"\x02\x82" * (n // 2) + b"\x00" * (n % 2))
    with open(base + ".idx", "wb") as f:
        kind = os.environ.get("FAKE_IDX", "")
        f.write((b"JPTAUY\0\0" if kind == "bad" else b"JPTAUX\0\0") + struct.pack("<II", 1, 40))
        f.write(struct.pack("<5Q", 0, n // 2, 1, 1000, 500))
        f.write(struct.pack("<5Q", n // 2, n - n // 2, 0, 2000, 0))
        if kind == "partial":
            f.write(b"\x01" * 12)
    os.makedirs(os.path.join(out, "eval"), exist_ok=True)
    with open(os.path.join(out, "eval", "fake-plugin.log"), "w") as f:
        f.write("\n".join(log) + "\n")
    if status < 0:   # like qemu: die of the guest's signal
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main())
