"""Benchmark archlab's data plane against its peers, in one run on one machine.

Two comparisons, each repeated with the contenders alternating so that drift of the machine
hits both alike:

1. Server: archlab's `single-thread` architecture vs nginx (one worker, `access_log off`,
   `return 200` with a body of the same size), both driven by the same wrk.
   Target: single-thread >= 0.9x nginx requests/s.
2. Client: `archlab-engine load` (closed model) vs wrk, both driving the same nginx.
   Target: archlab's generator >= 1.0x wrk requests/s.

The server side is pinned to one CPU and the client to the other (taskset / --cpus). Prints
every repetition, the medians and the ratios of medians. Traffic stays on 127.0.0.1.

usage: .venv/bin/python bench/http_peers.py [--reps 5] [--duration 5] [--connections 64]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINE = Path(os.environ.get("ARCHLAB_ENGINE", ROOT / "target" / "release" / "archlab-engine"))
BODY_BYTES = 12  # the same response body for both servers

NGINX_CONF = """
worker_processes 1;
master_process off;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 100000000;
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "{body}"; }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                r.read()
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no answer from {url} within {timeout} s") from None
            time.sleep(0.05)


@contextmanager
def running(cmd: list[str], url_of=None):
    """Start a server process, yield its base URL when it answers, always stop it."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = url_of(proc)
        wait_http(url)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def nginx(cpu: int):
    tmp = Path(tempfile.mkdtemp(prefix="archlab-nginx-"))
    port = free_port()
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, body="x" * BODY_BYTES))
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    try:
        with running(["taskset", "-c", str(cpu), binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf")],
                     lambda p: f"http://127.0.0.1:{port}/") as url:
            yield url
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def archlab_server(arch: str, cpu: int, path: str = f"/echo?size={BODY_BYTES}"):
    """An archlab server pinned to `cpu`; yields the URL of `path` on it once it answers there."""

    def url_of(p):
        line = p.stdout.readline().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"archlab-engine serve --arch {arch}: unexpected first line {line!r}: {p.stderr.read()}")
        return f"http://{line.split()[1]}{path}"

    with running([str(ENGINE), "serve", "--arch", arch, "--port", "0", "--cpus", str(cpu)], url_of) as url:
        yield url


def wrk(url: str, cpu: int, connections: int, duration: int) -> float:
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{duration}s", url],
        capture_output=True, text=True, check=True, timeout=duration + 30,
    ).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m:
        raise RuntimeError(f"cannot read wrk output:\n{out}")
    return float(m.group(1))


def archlab_load(url: str, cpu: int, connections: int, duration: int) -> float:
    import json

    hostport, _, path = url.removeprefix("http://").partition("/")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--target", hostport, "--path", "/" + path, "--connections", str(connections),
             "--duration", f"{duration}s", "--warmup", "1s", "--cpus", str(cpu), "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 30,
        )
        return float(json.loads(out.read_text())["throughput_rps"])


def compare(title: str, a_name: str, a, b_name: str, b, reps: int, target: float) -> None:
    """Run a() and b() alternately `reps` times; print medians and the ratio a/b."""
    xs, ys = [], []
    print(f"\n{title}")
    for i in range(reps):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        r1, r2 = first(), second()
        x, y = (r1, r2) if i % 2 == 0 else (r2, r1)
        xs.append(x)
        ys.append(y)
        print(f"  rep {i + 1}: {a_name} {x:12,.0f} req/s   {b_name} {y:12,.0f} req/s   ratio {x / y:.3f}")
    mx, my = statistics.median(xs), statistics.median(ys)
    ratio = mx / my
    verdict = "meets" if ratio >= target else "MISSES"
    print(f"  median: {a_name} {mx:,.0f} req/s, {b_name} {my:,.0f} req/s -> ratio {ratio:.3f} "
          f"({verdict} the target >= {target})")


def parse_arguments(description: str, extra=None) -> argparse.Namespace:
    """The options every peer benchmark takes (repetitions, duration, connections, CPUs);
    ``extra(parser)`` adds a benchmark's own."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="alternating repetitions (>= 5 for the targets)")
    ap.add_argument("--duration", type=int, default=5, help="seconds per measurement")
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    if extra is not None:
        extra(ap)
    return ap.parse_args()


def missing_prerequisite(tools: tuple[str, ...] = ("wrk", "taskset")) -> str | None:
    """Why the benchmark cannot run (a tool or the engine build missing), or None."""
    for tool in tools:
        if not shutil.which(tool):
            if tool == "memcslap":
                return "memcslap is missing (Debian package libmemcached-tools; make bench installs it)"
            return f"{tool} is missing (make bench installs it)"
    if not ENGINE.exists():
        return f"{ENGINE.relative_to(ROOT)} is missing; run make build"
    return None


def main() -> int:
    a = parse_arguments(__doc__)
    if why := missing_prerequisite():
        print(f"bench: {why}", file=sys.stderr)
        return 1
    sc, cc, n, d = a.server_cpu, a.client_cpu, a.connections, a.duration
    print(f"server on CPU {sc}, client on CPU {cc}, {n} connections, {d} s per measurement, "
          f"{a.reps} alternating repetitions, {BODY_BYTES}-byte bodies")

    def st_with_wrk():
        with archlab_server("single-thread", sc) as url:
            return wrk(url, cc, n, d)

    def nginx_with_wrk():
        with nginx(sc) as url:
            return wrk(url, cc, n, d)

    compare("1. server: archlab single-thread vs nginx (1 worker), both driven by wrk",
            "single-thread", st_with_wrk, "nginx", nginx_with_wrk, a.reps, 0.9)

    with nginx(sc) as url:
        compare("2. client: archlab-engine load vs wrk, both driving nginx",
                "archlab-load", lambda: archlab_load(url, cc, n, d), "wrk", lambda: wrk(url, cc, n, d), a.reps, 1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
