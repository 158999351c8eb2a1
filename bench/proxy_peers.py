"""Benchmark archlab's HTTP reverse proxy against HAProxy and nginx as load balancers, in one run
on one machine.

The three balancers sit in front of the same two backends (`archlab-engine serve --arch netty`,
one loop each) and are driven by the same generator (Debian's wrk, one thread). Each balancer is
pinned to the same single CPU (`--cpus` / taskset) and balances round-robin over keep-alive
connections to the backends; wrk is pinned to the other CPU. On a machine with two CPUs the
backends must share one: by default they share the generator's (`--backend-cpu`), so that the
balancer's CPU does nothing else; the output says which CPU each process had.

Configurations, as the strongest a competent user writes for this job (written by this script):
- archlab: `archlab-engine proxy --arch single-thread --policy round-robin` (`--arch` to compare
  others). single-thread is the event loop whose backend connections are non-blocking in the
  loop's own poller: on one CPU nothing changes threads (0 hand-offs per request), so a request
  costs its socket calls and parsing alone; the blocking models pay two context switches per
  request and netty a hand-off of each connection from its acceptor.
- HAProxy: `nbthread 1`, `mode http`, `option http-keep-alive` (keep-alive both ways, its
  default), `http-reuse always` (idle backend connections shared by all clients), `balance
  roundrobin`, logging off.
- nginx: `worker_processes 1`, `upstream` with `keepalive 64` (idle connections per worker),
  `keepalive_requests` raised on both sides, `proxy_http_version 1.1`, `proxy_set_header
  Connection ""`, access log off (the configuration of nginx's "upstream keepalive" documentation).
All three add `X-Forwarded-For` (archlab always does; `option forwardfor` and
`$proxy_add_x_forwarded_for`), so each does the same rewriting.

Measured, with the contenders alternating (order rotated every repetition):
1. throughput: wrk -t1 -cN on `/echo?size=12`; requests/s, and requests per second of balancer
   CPU (utime + stime of the balancer's threads from /proc/<pid>/stat around the run), which is
   the per-core figure even when the balancer's CPU is not saturated. Ratios archlab / peer are
   taken per repetition (a pair measured back to back) with a bootstrap 95% interval of their
   median. Target: archlab >= 1.0x HAProxy per balancer core; moonshot 1.3x.
2. added latency: wrk -t1 -c1 --latency, the p50 and p99 through each balancer minus those of
   the same requests sent to one backend directly in the same repetition.
3. upload: a 900 KB POST with `Expect: 100-continue` by curl (a real client, which waits up to
   1 s for the `100 Continue` before it sends the body), 10 per repetition through each
   balancer; the median of curl's time_total per repetition, and its ratio to HAProxy's in the
   same repetition. The backends send `100 Continue`; a balancer that reads the backend only
   after the whole body stalls every upload for curl's expect timeout. Target: every archlab
   architecture under 50 ms, the same order as HAProxy. `--archs all` takes every architecture
   that can proxy.

usage: .venv/bin/python bench/proxy_peers.py [--reps 5] [--duration 5] [--connections 64]
       [--archs single-thread|all|A,B] [--only throughput,latency,upload] [--backend-cpu 0]
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_peers import ENGINE, ROOT, _seconds, free_port, missing_prerequisite, parse_arguments  # noqa: E402
import harness  # noqa: E402
from harness import chosen_parts  # noqa: E402
from middleware_peers import bootstrap_median_ci, cpu_seconds, stopping, wait_accepting  # noqa: E402

PATH = "/echo?size=12"
PARTS = ("throughput", "latency", "upload")
UPLOAD_BYTES, UPLOAD_PATH, UPLOADS_PER_REP = 900_000, "/echo?size=0", 10
UPLOAD_TARGET_S = 0.050  # issue 27: every proxying architecture uploads in under 50 ms
RESULTS = ROOT / "bench" / "results"
PEERS = ("haproxy", "nginx")
TARGET, MOONSHOT = 1.0, 1.3  # issue 14: requests/s per balancer core against HAProxy

HAPROXY_CONF = """\
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    option forwardfor
    http-reuse always
    timeout connect 1s
    timeout client 60s
    timeout server 60s
frontend bench
    bind 127.0.0.1:{port}
    default_backend backends
backend backends
    balance roundrobin
{servers}
"""

NGINX_CONF = """\
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
    upstream backends {{
{servers}
        keepalive 64;
        keepalive_requests 100000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        }}
    }}
}}
"""


def version(cmd: list[str], pattern: str) -> str:
    """The version a peer prints (some print it on stderr, some exit non-zero)."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    m = re.search(pattern, p.stdout + p.stderr)
    return m.group(0) if m else "unknown"


def started(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def first_line_address(p: subprocess.Popen, what: str) -> str:
    line = p.stdout.readline().strip()
    if not line.startswith("listening "):
        raise RuntimeError(f"{what}: unexpected first line {line!r}: {p.stderr.read()}")
    return line.split()[1]


@contextmanager
def backend(cpu: int):
    """`archlab-engine serve --arch netty` with one loop, pinned to `cpu`. Yields HOST:PORT."""
    cmd = [str(ENGINE), "serve", "--arch", "netty", "--loops", "1", "--port", "0", "--cpus", str(cpu)]
    with stopping(started(cmd)) as p:
        yield first_line_address(p, "archlab-engine serve --arch netty")


@contextmanager
def archlab_proxy(arch: str, backends: list[str], cpu: int):
    """`archlab-engine proxy` pinned to `cpu`. Yields (HOST:PORT, pid)."""
    cmd = [str(ENGINE), "proxy", "--arch", arch, "--backends", ",".join(backends), "--policy", "round-robin",
           "--port", "0", "--cpus", str(cpu)]
    if arch == "netty":
        cmd += ["--loops", "1"]
    with stopping(started(cmd)) as p:
        yield first_line_address(p, f"archlab-engine proxy --arch {arch}"), p.pid


@contextmanager
def haproxy(backends: list[str], cpu: int):
    with tempfile.TemporaryDirectory(prefix="archlab-haproxy-") as d:
        port = free_port()
        conf = Path(d) / "haproxy.cfg"
        servers = "\n".join(f"    server b{i} {b}" for i, b in enumerate(backends))
        conf.write_text(HAPROXY_CONF.format(port=port, servers=servers))
        cmd = ["taskset", "-c", str(cpu), "haproxy", "-db", "-f", str(conf)]
        with stopping(started(cmd)) as p:
            wait_accepting(port, p, "haproxy")
            yield f"127.0.0.1:{port}", p.pid


@contextmanager
def nginx(backends: list[str], cpu: int):
    tmp = Path(tempfile.mkdtemp(prefix="archlab-nginx-"))
    try:
        port = free_port()
        servers = "\n".join(f"        server {b};" for b in backends)
        (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, servers=servers))
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        cmd = ["taskset", "-c", str(cpu), binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf")]
        with stopping(started(cmd)) as p:
            wait_accepting(port, p, "nginx")
            yield f"127.0.0.1:{port}", p.pid
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_UNIT_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


def wrk(target: str, cpu: int, connections: int, duration: float, pid: int | None, latency: bool = False) -> dict:
    """One wrk run against http://target/PATH; the balancer's CPU time is sampled around it."""
    # `--duration` is a float: wrk refuses "-d1.0s", so whole seconds go as "1s".
    cmd = ["taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{_seconds(duration)}", f"http://{target}{PATH}"]
    if latency:
        cmd.insert(-1, "--latency")
    before = cpu_seconds(pid) if pid else None
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 30)
    if done.returncode != 0:
        # wrk exits 1 without a summary when it cannot connect or its thread fails: say which
        # balancer and what wrk said, not a traceback of the subprocess call.
        alive = "" if pid is None else (" (its process has exited)" if not Path(f"/proc/{pid}").exists() else " (its process runs)")
        raise RuntimeError(f"wrk through {target}{alive} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip() or 'no output'}")
    out = done.stdout
    after = cpu_seconds(pid) if pid else None
    if bad := re.search(r"Non-2xx or 3xx responses: \d+", out):
        raise RuntimeError(f"wrk through {target}: {bad.group(0)}\n{out}")
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not (m and rps):
        raise RuntimeError(f"cannot read wrk output:\n{out}")
    result = {"rps": float(rps.group(1)), "requests": int(m.group(1))}
    # A few connections a balancer resets as wrk stops (HAProxy does now and then: a read error
    # in about one run of twenty) are kept and counted; more than one per 10,000 requests is a
    # failing balancer, not a measurement.
    if errors := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        result["socket_errors"] = sum(int(g) for g in errors.groups())
        if result["socket_errors"] * 10_000 > result["requests"]:
            raise RuntimeError(f"wrk through {target}: {errors.group(0)}\n{out}")
    if before is not None and after > before:
        result["balancer_cpu_s"] = after - before
        result["rps_per_core"] = result["requests"] / (after - before)
    if latency:
        for q in ("50", "99"):
            lm = re.search(rf"^\s+{q}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
            if not lm:
                raise RuntimeError(f"cannot read the {q}th percentile in wrk output:\n{out}")
            result[f"p{q}_us"] = float(lm.group(1)) * _UNIT_US[lm.group(2)]
    return result


def proxy_architectures() -> list[str]:
    """The architectures that can proxy, as `archlab-engine architectures` lists them."""
    out = subprocess.run([str(ENGINE), "architectures"], capture_output=True, text=True, timeout=30, check=True).stdout
    section = out.split("proxy (", 1)[1].splitlines()[1:]
    return [line.split()[0] for line in section if line.strip() and "cannot" not in line]


def curl_upload(target: str, cpu: int, body: Path) -> float:
    """One POST of `body` with `Expect: 100-continue` by curl, pinned to `cpu`: curl's time_total (s)."""
    cmd = ["taskset", "-c", str(cpu), "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}",
           "-H", "Expect: 100-continue", "--data-binary", f"@{body}", f"http://{target}{UPLOAD_PATH}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) != 2 or fields[0] != "200":
        raise RuntimeError(f"curl upload through {target} exited {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip() or 'no output'}")
    return float(fields[1])


def upload_summary(results: dict[str, list[dict]], ours: list[str]) -> dict:
    summary = {}
    for name, runs in results.items():
        ms = statistics.median(r["median_s"] for r in runs) * 1e3
        verdict = ""
        if name in ours:
            verdict = "meets" if ms < UPLOAD_TARGET_S * 1e3 else "MISSES"
            verdict = f"   ({verdict} < {UPLOAD_TARGET_S * 1e3:.0f} ms)"
        summary[name] = {"median_ms": ms, "runs": runs}
        if name in ours:
            text, r = ratio_text([x["median_s"] for x in results[name]], [y["median_s"] for y in results["haproxy"]])
            summary[name]["ratio_to_haproxy"] = r
            verdict += f"   time / HAProxy's {text}"
        print(f"    {name:<32} {ms:8.1f} ms per 900 KB upload{verdict}")
    return summary


def alternate(names: list[str], reps: int, run_one, show: str) -> dict[str, list[dict]]:
    """Run every contender once per repetition, the order rotated each time."""
    results: dict[str, list[dict]] = {n: [] for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(run_one(name))
        print(f"  rep {rep + 1:2}: " + "   ".join(f"{n} {show(results[n][-1])}" for n in names), flush=True)
    return results


def ratio_text(xs: list[float], ys: list[float]) -> tuple[str, dict]:
    ratios = [x / y for x, y in zip(xs, ys)]
    med, (lo, hi) = statistics.median(ratios), bootstrap_median_ci(ratios)
    return f"{med:.2f} [{lo:.2f}, {hi:.2f}]", {"median": med, "ci95": [lo, hi]}


def throughput_summary(results: dict[str, list[dict]], ours: list[str]) -> dict:
    summary = {}
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        per_core = [r["rps_per_core"] for r in runs if "rps_per_core" in r]
        cpu = statistics.median(r["balancer_cpu_s"] for r in runs if "balancer_cpu_s" in r) if per_core else None
        entry = {"rps": rps, "rps_per_core": statistics.median(per_core) if per_core else None, "runs": runs}
        errors = sum(r.get("socket_errors", 0) for r in runs)
        print(f"    {name:<22} {rps:10,.0f} req/s   {entry['rps_per_core'] or 0:10,.0f} req/s per balancer core"
              f"   (balancer CPU {cpu or 0:.2f} s of each run)" + (f"; {errors} socket errors in all" if errors else ""))
        summary[name] = entry
    for name in ours:
        for peer in PEERS:
            text, r = ratio_text([x["rps"] for x in results[name]], [y["rps"] for y in results[peer]])
            pairs = [(x["rps_per_core"], y["rps_per_core"]) for x, y in zip(results[name], results[peer])
                     if "rps_per_core" in x and "rps_per_core" in y]
            ctext, c = ratio_text([p[0] for p in pairs], [p[1] for p in pairs])
            summary[name][f"ratio_to_{peer}"] = {"rps": r, "per_core": c}
            verdict = ""
            if peer == "haproxy":
                verdict = f" ({'meets' if c['median'] >= TARGET else 'MISSES'} >= {TARGET}x per core; moonshot {MOONSHOT}x)"
            print(f"    {name} / {peer}: req/s {text}, per balancer core {ctext}{verdict}")
    return summary


def main() -> int:
    a = parse_arguments(__doc__, extra=_extra_options)
    parts = chosen_parts(a.only, PARTS)
    if parts is None:
        return 2
    archs = proxy_architectures() if a.archs == "all" else a.archs.split(",")
    if a.reps < 5:
        print(f"bench: note: --reps {a.reps} is below the 5 pairs the figures are judged on", file=sys.stderr)
    if why := missing_prerequisite(("wrk", "taskset", "haproxy", "nginx", "curl")):
        print(f"bench: {why} (Debian packages wrk, haproxy, nginx-light; make bench-proxy installs them)", file=sys.stderr)
        return 1
    bc, gc, backc, n, d = a.server_cpu, a.client_cpu, a.backend_cpu, a.connections, a.duration
    versions = {
        "archlab": version([str(ENGINE), "--version"], r"archlab-engine \S+"),
        "haproxy": version(["haproxy", "-v"], r"HAProxy version \S+"),
        "nginx": version([shutil.which("nginx") or "/usr/sbin/nginx", "-v"], r"nginx/\S+"),
        "wrk": version(["wrk", "-v"], r"wrk \S+"),
    }
    print("versions: " + ", ".join(versions.values()))
    print(f"CPUs: balancer (each of archlab {', archlab '.join(archs)}, haproxy, nginx) on CPU {bc}; wrk on CPU {gc}; "
          f"2 backends (archlab-engine serve --arch netty --loops 1) on CPU {backc}")
    print(f"{n} connections, {d} s per measurement, {a.reps} alternating repetitions, GET {PATH}")
    report: dict = {"settings": vars(a), "versions": versions}
    with ExitStack() as stack:
        backends = [stack.enter_context(backend(backc)) for _ in range(2)]
        procs = {f"archlab {arch}": stack.enter_context(archlab_proxy(arch, backends, bc)) for arch in archs}
        procs["haproxy"] = stack.enter_context(haproxy(backends, bc))
        procs["nginx"] = stack.enter_context(nginx(backends, bc))
        ours = [f"archlab {arch}" for arch in archs]
        # One short run through each, so that pools and caches are warm before the first measurement.
        if parts & {"throughput", "latency"}:
            for target, pid in procs.values():
                wrk(target, gc, n, 1, pid)
        if "throughput" in parts:
            print(f"\n1. throughput: wrk -t1 -c{n}, round-robin over 2 backends", flush=True)
            results = alternate(list(procs), a.reps, lambda name: wrk(procs[name][0], gc, n, d, procs[name][1]),
                                lambda r: f"{r['rps']:9,.0f}/s")
            print(f"  medians over {a.reps} repetitions; ratios: median of per-repetition ratios [bootstrap 95% interval]")
            report["throughput"] = throughput_summary(results, ours)
        if "latency" in parts:
            print("\n2. added latency: wrk -t1 -c1 --latency; balancer minus one backend directly, same repetition",
                  flush=True)
            targets = {"direct": (backends[0], None), **procs}
            results = alternate(list(targets), a.reps,
                                lambda name: wrk(targets[name][0], gc, 1, d, targets[name][1], latency=True),
                                lambda r: f"p50 {r['p50_us']:6.1f} p99 {r['p99_us']:7.1f} us")
            direct = results["direct"]
            print(f"  direct: p50 {statistics.median(r['p50_us'] for r in direct):.1f} us, "
                  f"p99 {statistics.median(r['p99_us'] for r in direct):.1f} us (medians)")
            added = {}
            for name in procs:
                added[name] = {q: statistics.median(r[q] - b[q] for r, b in zip(results[name], direct))
                               for q in ("p50_us", "p99_us")}
                print(f"    {name:<22} adds p50 {added[name]['p50_us']:7.1f} us   p99 {added[name]['p99_us']:7.1f} us "
                      "(median of per-repetition differences)")
            report["latency"] = {"added_us": added, "runs": results}
        if "upload" in parts:
            print(f"\n3. upload: {UPLOADS_PER_REP} x curl POST {UPLOAD_PATH} of {UPLOAD_BYTES:,} bytes with "
                  "Expect: 100-continue per repetition; median time_total", flush=True)
            body = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="archlab-upload-"))) / "body"
            body.write_bytes(bytes(i % 251 for i in range(UPLOAD_BYTES)))

            def uploads(name: str) -> dict:
                times = [curl_upload(procs[name][0], gc, body) for _ in range(UPLOADS_PER_REP)]
                return {"median_s": statistics.median(times), "max_s": max(times), "times_s": times}

            for name in procs:
                uploads(name)  # warm: backend connections open, buffers sized
            results = alternate(list(procs), a.reps, uploads, lambda r: f"{r['median_s'] * 1e3:6.1f} ms")
            print(f"  medians over {a.reps} repetitions; ratios: median of per-repetition ratios [bootstrap 95% interval]")
            report["upload"] = upload_summary(results, ours)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "proxy_peers.json"
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nraw repetitions: {out.relative_to(ROOT)}")
    return 0


def _extra_options(ap) -> None:
    ap.add_argument("--only", metavar="PARTS", help=f"comma-separated subset of {','.join(PARTS)} (default: all)")
    ap.add_argument("--archs", default="single-thread",
                    help="archlab architectures to compare, comma-separated, or all that can proxy (default single-thread)")
    ap.add_argument("--backend-cpu", type=harness.count(0), default=0, help="CPU of the two backends (default 0, the generator's)")


if __name__ == "__main__":
    harness.run_main(main)
