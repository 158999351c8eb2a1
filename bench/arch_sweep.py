"""Sweep every registered architecture against nginx, in one run on one machine.

Every architecture that `archlab-engine architectures` lists serves two workloads,
`/echo?size=100` (I/O-bound: a 100-byte answer) and `/prime?n=27059` (CPU-bound: about 30-60 us
of trial division), at 16 and 256 connections. nginx with one worker, answering `return 200`
with a static body of the same size as archlab's answer, is measured in the same run as the
reference: on `/echo` it is the peer, on `/prime` it is the ceiling of a server that does no work,
so the ratio there says how much of that ceiling the computation leaves.

One `archlab-engine load` (closed model, the same for every server) drives each cell. Servers are
pinned to one CPU and the generator to the other; the order of the servers is reversed on every
other repetition so that drift of the machine hits all alike. Prints a table of medians
(requests/s, ratio to nginx's median, p99 of the response time, and whether any repetition was
generator-bound, in which case the cell shows the generator's limit, not the server's), and writes
the raw repetitions to `bench/results/arch_sweep.json` and a bar chart to
`bench/results/arch_sweep.svg`.

usage: .venv/bin/python bench/arch_sweep.py [--reps 3] [--duration 3] [--arch a,b,...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import http_peers  # noqa: E402
from http_peers import ENGINE, NGINX_CONF, ROOT, free_port, missing_prerequisite, running  # noqa: E402

WORKLOADS = ("/echo?size=100", "/prime?n=27059")
CONCURRENCY = (16, 256)
RESULTS = ROOT / "bench" / "results"


def registry() -> list[str]:
    """Architecture names in registry order, as the engine lists them."""
    out = subprocess.run([str(ENGINE), "architectures"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@contextmanager
def archlab_server(arch: str, cpu: int):
    """The server's base URL (no path), once it answers."""
    with http_peers.archlab_server(arch, cpu, "/echo?size=1") as url:
        yield url.removesuffix("/echo?size=1")


@contextmanager
def nginx_answering(body: bytes, cpu: int):
    """nginx, one worker, answering every request with `body` (200)."""
    tmp = Path(tempfile.mkdtemp(prefix="archlab-nginx-"))
    port = free_port()
    escaped = body.decode().replace("\\", "\\\\").replace('"', '\\"')
    (tmp / "nginx.conf").write_text(NGINX_CONF.format(tmp=tmp, port=port, body=escaped))
    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    try:
        with running(["taskset", "-c", str(cpu), binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf")],
                     lambda p: f"http://127.0.0.1:{port}/") as url:
            yield url.removesuffix("/")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(base: str, path: str, cpu: int, connections: int, duration: int) -> dict:
    """One closed-model measurement: throughput, p99 (us), generator-bound verdict."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--target", base.removeprefix("http://"), "--path", path,
             "--connections", str(connections), "--duration", f"{duration}s", "--warmup", "1s",
             "--cpus", str(cpu), "--quiet", "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 60,
        )
        s = json.loads(out.read_text())
    return {"rps": float(s["throughput_rps"]), "p99_us": float(s["latency_us"]["p99"]),
            "errors": int(s["errors"]["total"]),
            "bound": bool(s["generator"]["bound"])}


def answer_of(path: str, sc: int) -> bytes:
    """The body archlab answers on `path`, so that nginx can answer the same bytes."""
    with archlab_server("single-thread", sc) as base:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            return r.read()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=harness.count(), default=3, help="repetitions of the whole sweep (medians need >= 3)")
    ap.add_argument("--duration", type=harness.count(), default=3, help="seconds measured per cell (after 1 s warm-up)")
    ap.add_argument("--arch", default="", help="comma-separated subset of the registry (default: all)")
    ap.add_argument("--server-cpu", type=harness.count(0), default=1)
    ap.add_argument("--client-cpu", type=harness.count(0), default=0)
    a = ap.parse_args()
    if why := missing_prerequisite(("nginx", "taskset")):
        print(f"bench: {why}", file=sys.stderr)
        return 1
    known = registry()
    archs = [x for x in a.arch.split(",") if x] or known
    if unknown := [x for x in archs if x not in known]:
        print(f"bench: --arch: unknown {', '.join(unknown)}; allowed: {', '.join(known)}", file=sys.stderr)
        return 2
    sc, cc = a.server_cpu, a.client_cpu
    servers = ["nginx", *archs]
    cells = len(servers) * len(WORKLOADS) * len(CONCURRENCY) * a.reps
    print(f"server on CPU {sc}, generator on CPU {cc}, {a.duration} s per cell after 1 s warm-up, "
          f"{a.reps} repetitions, {cells} cells (about {cells * (a.duration + 2) / 60:.0f} min)", file=sys.stderr)

    samples: dict[tuple[str, str, int], list[dict]] = {}
    started = time.monotonic()
    done = 0
    for path in WORKLOADS:
        body = answer_of(path, sc)
        for rep in range(a.reps):
            order = servers if rep % 2 == 0 else servers[::-1]
            for server in order:
                ctx = nginx_answering(body, sc) if server == "nginx" else archlab_server(server, sc)
                with ctx as base:
                    for c in CONCURRENCY:
                        m = load(base, path, cc, c, a.duration)
                        samples.setdefault((server, path, c), []).append(m)
                        done += 1
                        print(f"  [{done}/{cells}, {time.monotonic() - started:.0f} s] {server} {path} c={c}: "
                              f"{m['rps']:,.0f} req/s p99 {m['p99_us']:,.0f} us", file=sys.stderr)

    rows = []
    for path in WORKLOADS:
        for c in CONCURRENCY:
            ref = statistics.median(m["rps"] for m in samples[("nginx", path, c)])
            for server in servers:
                ms = samples[(server, path, c)]
                rps = statistics.median(m["rps"] for m in ms)
                rows.append({"server": server, "path": path, "connections": c, "rps": rps, "ratio": rps / ref,
                             "p99_us": statistics.median(m["p99_us"] for m in ms),
                             "errors": sum(m["errors"] for m in ms), "generator_bound": any(m["bound"] for m in ms),
                             "reps": ms})
    print_table(rows)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "arch_sweep.json").write_text(json.dumps({"duration_s": a.duration, "reps": a.reps, "rows": rows}, indent=1))
    plot(rows, RESULTS / "arch_sweep.svg")
    print(f"\nraw repetitions: {RESULTS / 'arch_sweep.json'}; chart: {RESULTS / 'arch_sweep.svg'}")
    return 0


def print_table(rows: list[dict]) -> None:
    print("\nmedians; ratio = requests/s over nginx's median in the same cell; * = generator-bound in a repetition")
    head = f"{'architecture':<22}"
    cols = [(p, c) for p in WORKLOADS for c in CONCURRENCY]
    for p, c in cols:
        head += f" | {p + ' c' + str(c):>27}"
    print(head)
    print(f"{'':<22}" + " | {:>9} {:>6} {:>10}".format("req/s", "ratio", "p99 us") * len(cols))
    by = {(r["server"], r["path"], r["connections"]): r for r in rows}
    for server in dict.fromkeys(r["server"] for r in rows):
        line = f"{server:<22}"
        for p, c in cols:
            r = by[(server, p, c)]
            flag = "*" if r["generator_bound"] else " "
            line += f" | {r['rps']:>9,.0f} {r['ratio']:>6.2f} {r['p99_us']:>9,.0f}{flag}"
        print(line)


def plot(rows: list[dict], path: Path) -> None:
    """Ratio to nginx per architecture, one panel per workload and concurrency."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    sys.path.insert(0, str(ROOT / "python"))
    from archlab.plotstyle import style

    with matplotlib.rc_context(style({"font.size": 8})):
        draw(rows, path, plt)


def draw(rows: list[dict], path: Path, plt) -> None:
    cols = [(p, c) for p in WORKLOADS for c in CONCURRENCY]
    servers = list(dict.fromkeys(r["server"] for r in rows))
    by = {(r["server"], r["path"], r["connections"]): r for r in rows}
    fig, axes = plt.subplots(1, len(cols), figsize=(4 * len(cols), 0.28 * len(servers) + 1.5), sharey=True)
    for ax, (p, c) in zip(axes, cols):
        ratios = [by[(s, p, c)]["ratio"] for s in servers]
        ax.barh(range(len(servers)), ratios, color=["#888" if s == "nginx" else "C0" for s in servers])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_title(f"{p}  c={c}", fontsize=9)
        ax.set_xlabel("req/s / nginx")
    axes[0].set_yticks(range(len(servers)), servers, fontsize=8)
    axes[0].invert_yaxis()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    harness.run_main(main)
