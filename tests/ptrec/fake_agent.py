#!/usr/bin/env python3
"""Test double for the JVM agent's side of the handshake (docs/FORMAT.md).

usage: fake_agent.py [--exit N] [--sleep] [--raw] LINE...
Sends each LINE (plus '\\n', unless --raw) on $JPT_HANDSHAKE_FD and prints
"reply: <line>" for the answer to each; prints the environment ptrec set up;
then sleeps until a signal (--sleep) or exits with N.
"""
import os
import signal
import socket
import sys
import time


def say(line):
    """One write per line: JVMs of a script run at once share the output."""
    os.write(1, (line + "\n").encode(errors="replace"))


def main():
    args = sys.argv[1:]
    code, sleep, raw = 0, False, False
    while args and args[0].startswith("--"):
        if args[0] == "--exit":
            code = int(args[1])
            args = args[2:]
        elif args[0] == "--sleep":
            sleep, args = True, args[1:]
        elif args[0] == "--raw":
            raw, args = True, args[1:]
        else:
            break
    for k in ("JPT_TRACE_DIR", "JAVA_TOOL_OPTIONS"):
        say(f"env {k}={os.environ.get(k, '')}")
    fd = os.environ.get("JPT_HANDSHAKE_FD")
    if args:
        s = socket.socket(fileno=int(fd))
        s.settimeout(10)
        f = s.makefile("rb")
        for line in args:
            s.sendall(line.encode("latin-1").decode("unicode_escape").encode("latin-1")
                      + (b"" if raw else b"\n"))
            say("reply: " + f.readline().decode(errors="replace").rstrip("\n"))
    if sleep:
        say(f"pid {os.getpid()} ppid {os.getppid()}")
        say("sleeping")
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            time.sleep(1)
    return code


if __name__ == "__main__":
    sys.exit(main())
