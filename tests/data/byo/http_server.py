"""A small foreign system for the bring-your-own-system tests: a threaded HTTP/1.1 server (keep-
alive) on ``--host``/``--port`` answering ``/delay?ms=M`` after sleeping M + ``--extra-delay-ms``
milliseconds, and every other path with 200. Faults on request: ``--exit-at-start`` (exits before
it listens), ``--never-listen`` (stays up without listening), ``--die-after-s`` (exits mid-run),
``--ignore-term`` (ignores SIGTERM), ``--escaping-grandchild`` (starts a child that starts a
grandchild in a new session ignoring SIGTERM; both are left behind when the server stops)."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

GRANDCHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(3600)\n"
CHILD = (
    "import os, subprocess, sys, time\n"
    f"subprocess.Popen([sys.executable, '-c', {GRANDCHILD!r}], start_new_session=True)\n"
    "while True: time.sleep(3600)\n"
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--extra-delay-ms", type=float, default=0.0)
    p.add_argument("--exit-at-start", action="store_true")
    p.add_argument("--never-listen", action="store_true")
    p.add_argument("--die-after-s", type=float)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--escaping-grandchild", action="store_true")
    args = p.parse_args()
    print(f"test server starting on {args.host}:{args.port}", flush=True)
    print(f"affinity {','.join(map(str, sorted(os.sched_getaffinity(0))))}", flush=True)
    if args.exit_at_start:
        print("configuration error: refusing to start", flush=True)
        sys.exit(3)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.never_listen:
        while True:
            time.sleep(3600)
    if args.escaping_grandchild:
        subprocess.Popen([sys.executable, "-c", CHILD])
    extra_s = args.extra_delay_ms / 1000

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            url = urlsplit(self.path)
            if url.path == "/delay":
                time.sleep(float(parse_qs(url.query).get("ms", ["0"])[0]) / 1000 + extra_s)
            body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    if args.die_after_s is not None:
        threading.Timer(args.die_after_s, lambda: os._exit(7)).start()
    if not args.ignore_term:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
