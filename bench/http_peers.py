"""Benchmark archlab's data plane against its peers, in one run on one machine.

Two comparisons, each measured the harness's way (``bench/harness.py``: one warm-up, then
``--reps`` repetitions of ``--duration`` s with the contenders alternating; the median of
per-pair ratios with a bootstrap 95% interval; a target is met only when the interval clears it):

1. Server: archlab's `single-thread` architecture vs nginx (one worker, `access_log off`,
   `return 200` with a body of the same size), both driven by the same wrk, which first warms
   each freshly started server up for ``--warmup`` s in a separate run. Each server's CPU time per
   request comes from its /proc/<pid>/stat (utime + stime) across the timed run.
   Target: single-thread >= 1.1x nginx, judged per server core: on the pair-by-pair ratio of
   server CPU time per request (nginx's / single-thread's). Both servers answer as fast as one
   wrk thread asks (wrk spends more CPU per request than either server), so their requests/s
   ratio measures wrk; it is printed beside.
2. Client: `archlab-engine load` (closed model) on each of its backends (``backend =
   "io-uring"``: one ring per thread, batched submission, multishot receive; ``"epoll"``) vs
   wrk, the three alternating, all driving the same nginx, with the same warm-up: archlab's
   generator warms up for ``--warmup`` s inside its run (its window starts after it, on the same
   connections), wrk gets a separate run of ``--warmup`` s right before its timed one. Each
   generator is one thread on one pinned core, so requests/s is requests/s per generator core.
   Generator CPU per request: archlab's load threads' own CPU time in the window (its summary's
   ``thread_cpu``), wrk's from getrusage of the waited-for child.
   Targets: io-uring >= 1.5x wrk requests/s per generator core (issue 19); epoll >= 1.0x. Per
   core means per CPU-second the generator used: requests/s bounded by the server (the usual
   case, nginx on one core) says nothing about the generator, so the target is judged on the
   pair-by-pair ratio of CPU time per request (wrk's / archlab's), which steal time and
   waiting for a busy CPU do not inflate; the requests/s ratio is printed beside it.

Every CPU time is split into user and kernel time. Beside each per-core ratio the bench prints
the ratio the contender would reach with no user time at all (the peer's CPU per request over
the contender's kernel time alone): on loopback the sender's CPU also runs the receiver's TCP
input, so the kernel's share bounds what any server or generator code can show here.

The server side is pinned to one CPU and the client to the other (taskset / --cpus). Traffic
stays on 127.0.0.1. Results: ``bench/results/http_peers.json``.

usage: .venv/bin/python bench/http_peers.py [--reps 20] [--duration 1] [--warmup 1] [--connections 64]
       [--only server|client]
"""

from __future__ import annotations

import argparse
import json
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
sys.path.insert(0, str(ROOT / "bench"))
import harness  # noqa: E402

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


# The pid of the server answering at each URL `running` yields (its CPU time is read from /proc).
SERVER_PIDS: dict[str, int] = {}


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
    url = ""
    try:
        url = url_of(proc)
        wait_http(url)
        SERVER_PIDS[url] = proc.pid
        yield url
    finally:
        SERVER_PIDS.pop(url, None)
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


def wrk(url: str, cpu: int, connections: int, duration: float, warmup: float = 0.0) -> harness.Sample:
    """Requests/s of one wrk run (-t1) of ``duration`` s, after a separate wrk run of ``warmup`` s
    on the same server; the sample's CPU time is wrk's own (getrusage of the waited-for child) in
    the timed run, and the server's (/proc/<pid>/stat) in ``extra['server_cpu_s']``."""
    if warmup > 0:
        _wrk_run(url, cpu, connections, warmup)
    server = SERVER_PIDS.get(url)
    nan = harness.CpuTime(float("nan"), float("nan"))
    server_before = harness.process_cpu(server) if server else nan
    before = harness.children_cpu()
    out = _wrk_run(url, cpu, connections, duration)
    used = harness.children_cpu() - before
    server_cpu = harness.process_cpu(server) - server_before if server else nan
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not m or not rate:
        raise RuntimeError(f"cannot read wrk output:\n{out}")
    return harness.Sample(float(rate.group(1)), float(m.group(1)), used.total,
                          {"server_cpu_s": server_cpu.total, "server_system_s": server_cpu.system}, used.system)


def _wrk_run(url: str, cpu: int, connections: int, duration: float) -> str:
    return subprocess.run(
        ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{_seconds(duration)}", url],
        capture_output=True, text=True, check=True, timeout=duration + 30,
    ).stdout


def _seconds(duration: float) -> str:
    """A duration as wrk and archlab-engine take it: whole seconds, else milliseconds."""
    return f"{duration:g}s" if float(duration).is_integer() else f"{round(duration * 1000)}ms"


def archlab_load(url: str, cpu: int, connections: int, duration: float, warmup: float = 1.0,
                 backend: str = "auto") -> harness.Sample:
    """Requests/s of one closed-model run of ``duration`` s after ``warmup`` s on the same
    connections, on the load backend ``backend``; CPU time is the load threads' own in the window
    (the summary's thread_cpu)."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    server = SERVER_PIDS.get(url)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--target", hostport, "--path", "/" + path, "--connections", str(connections),
             "--duration", _seconds(duration), "--warmup", _seconds(warmup), "--cpus", str(cpu), "--quiet",
             "--backend", backend, "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + warmup + 30,
        )
        summary = json.loads(out.read_text())
    threads = summary["generator"]["thread_cpu"]
    system_s = sum(t["sys_s"] for t in threads)
    return harness.Sample(float(summary["throughput_rps"]), float(summary["responses"]),
                          sum(t["user_s"] for t in threads) + system_s,
                          {"server": server, "generator_bound": summary["generator"]["bound"],
                           "backend": summary["generator"]["backend"]}, system_s)


def compare(title: str, a_name: str, a, b_name: str, b, reps: int, target: float, *,
            cpu_of: str = "generator", per_core: bool = False) -> dict:
    """Alternate a() and b() (each returns a Sample of requests/s) ``reps`` times after one
    warm-up each; print the ratio a/b with its interval and each one's CPU time per request
    (``cpu_of``: whose CPU the samples carry, "generator" or "server"; ``per_core`` as in
    :func:`compare_many`)."""
    return compare_many(title, [(a_name, a, target)], b_name, b, reps, cpu_of=cpu_of, per_core=per_core)


def compare_many(title: str, contenders: list[tuple[str, object, float]], peer_name: str, peer, reps: int, *,
                 cpu_of: str = "generator", per_core: bool = False) -> dict:
    """Alternate every contender (name, run, target) and the peer ``reps`` times after one
    warm-up each; print each contender's ratio to the peer with its interval, and everyone's CPU
    time per request (``cpu_of``: whose CPU the samples carry, "generator" or "server").
    ``per_core``: the target is judged on requests per CPU-second of the samples' CPU (peer's
    CPU per request / the contender's), else on requests/s."""
    print(f"\n{title}")
    result = harness.alternate([harness.Contender(n, run) for n, run, _ in contenders]
                               + [harness.Contender(peer_name, peer)], reps)

    def cpu_per_request(name: str, kernel_only: bool = False) -> list[float]:
        """Microseconds of ``cpu_of``'s CPU per request (``kernel_only``: its system time),
        repetition by repetition."""
        if cpu_of == "server":
            key = "server_system_s" if kernel_only else "server_cpu_s"
            return [s.extra[key] / s.work * 1e6 for s in result.samples[name]]
        return [s.system_per_unit_us if kernel_only else s.cpu_per_unit_us for s in result.samples[name]]

    rows = []
    for name in [n for n, _, _ in contenders] + [peer_name]:
        cpu_us = statistics.median(cpu_per_request(name))
        kernel_us = statistics.median(cpu_per_request(name, kernel_only=True))
        rows.append({"comparison": title, "contender": name, "median_rps": statistics.median(result.values(name)),
                     f"{cpu_of}_cpu_us_per_request": cpu_us, f"{cpu_of}_kernel_us_per_request": kernel_us})
        print(f"  {name:<18} median {rows[-1]['median_rps']:>12,.0f} req/s   {cpu_of} CPU {cpu_us:6.2f} us/request"
              f" ({kernel_us:.2f} in the kernel)")
    for row, (name, _, target) in zip(rows, contenders):
        interval = result.ratio(name, peer_name, higher_is_better=True)
        row["ratio"], row["target"] = interval, target
        if per_core:
            row["per_core_ratio"] = judged = harness.median_ratio_interval(cpu_per_request(peer_name),
                                                                           cpu_per_request(name))
            # What the contender would reach if its own code cost nothing and its kernel work
            # stayed the same: the peer's CPU per request over the contender's kernel time alone.
            # A target above this ceiling is out of reach of anything the contender does in user
            # space (on loopback the kernel time includes the receiver's side of every packet).
            row["per_core_ceiling"] = ceiling = harness.median_ratio_interval(
                cpu_per_request(peer_name), cpu_per_request(name, kernel_only=True))
            print(f"  {name} / {peer_name}: requests/s {interval}; requests per {cpu_of} CPU-second {judged} "
                  f"({harness.verdict(judged, target)}); with no user time at all: {ceiling}"
                  + (" (the target lies beyond it)" if ceiling.high < target else ""))
        else:
            judged = interval
            print(f"  {name} / {peer_name}: {interval} ({harness.verdict(interval, target)})")
        row["met"] = judged.clears(target)
    return {"rows": rows, "raw": harness.raw_samples(result)}


def parse_arguments(description: str, extra=None) -> argparse.Namespace:
    """The options every peer benchmark takes (repetitions, duration, connections, CPUs);
    ``extra(parser)`` adds a benchmark's own."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=harness.count(), default=20, help="alternating repetitions after one warm-up (default 20)")
    ap.add_argument("--duration", type=harness.number(), default=1.0, help="seconds per timed measurement (default 1)")
    ap.add_argument("--warmup", type=harness.number(zero_allowed=True), default=1.0, help="seconds of warm-up before each measurement (default 1)")
    ap.add_argument("--connections", type=harness.count(), default=64)
    ap.add_argument("--server-cpu", type=harness.count(0), default=1)
    ap.add_argument("--client-cpu", type=harness.count(0), default=0)
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
    a = parse_arguments(__doc__, lambda ap: ap.add_argument(
        "--only", choices=("server", "client"), help="run one of the two comparisons (default both)"))
    if why := missing_prerequisite(("wrk", "nginx", "taskset")):
        print(f"bench: {why}", file=sys.stderr)
        return 1
    sc, cc, n, d, w = a.server_cpu, a.client_cpu, a.connections, a.duration, a.warmup
    facts = harness.machine_facts(peer_versions())
    print(f"server on CPU {sc}, client on CPU {cc}, {n} connections, {d:g} s per measurement after {w:g} s of "
          f"warm-up, {a.reps} alternating repetitions, {BODY_BYTES}-byte bodies; "
          + ", ".join(f"{k} {v}" for k, v in facts["tools"].items()))

    def st_with_wrk():
        with archlab_server("single-thread", sc) as url:
            return wrk(url, cc, n, d, w)

    def nginx_with_wrk():
        with nginx(sc) as url:
            return wrk(url, cc, n, d, w)

    none: dict = {"rows": [], "raw": {}}
    server = none if a.only == "client" else compare(
        "1. server: archlab single-thread vs nginx (1 worker), both driven by wrk",
        "single-thread", st_with_wrk, "nginx", nginx_with_wrk, a.reps, 1.1, cpu_of="server", per_core=True)
    client = none
    if a.only != "server":
        with nginx(sc) as url:
            client = compare_many(
                "2. client: archlab-engine load (io-uring, epoll) vs wrk, all driving nginx",
                [("archlab-io-uring", lambda: archlab_load(url, cc, n, d, w, "io-uring"), 1.5),
                 ("archlab-epoll", lambda: archlab_load(url, cc, n, d, w, "epoll"), 1.0)],
                "wrk", lambda: wrk(url, cc, n, d, w), a.reps, per_core=True)
    settings = {"reps": a.reps, "duration_s": d, "warmup_s": w, "connections": n, "server_cpu": sc, "client_cpu": cc,
                "only": a.only}
    path = harness.write_results("http_peers", server["rows"] + client["rows"], facts, settings,
                                 {"server": server["raw"], "client": client["raw"]})
    print(f"\nresults: {path}")
    return 0


def peer_versions() -> dict[str, str]:
    """Versions of the peers and of archlab's engine, as they report them."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    return {"wrk": harness.tool_version(["wrk", "-v"], r"wrk [\w.+/\-]+"),
            "nginx": harness.tool_version([binary, "-v"], r"nginx/[\w.\-]+"),
            "archlab-engine": harness.tool_version([str(ENGINE), "--version"])}


if __name__ == "__main__":
    harness.run_main(main)
