"""Benchmark archlab's memcached middleware (seed 002) against twemproxy, in one run on one machine.

Both proxies sit in front of the same real memcached servers (Debian's memcached, one thread
each, sharing both CPUs, preloaded with 10,000 keys of 1 KiB values, seed 002 §1.10's value
size) and are driven by the same generator (`archlab-engine load --protocol memcached`, closed
model). Each proxy is pinned to one CPU (`--cpus` / taskset) and the generator to the other, so
requests per second are per proxy core; the proxy's CPU time per request is read from
/proc/<pid>/stat (utime + stime of all its threads) at the generator's `phase measure` and
`phase end` lines, which is the per-core cost even when other work shares the machine.
Contenders alternate, their order rotated every repetition; results are medians, and the ratio
archlab / twemproxy is taken per repetition (a pair measured back to back) with a bootstrap 95%
interval of its median.

Like is compared with like: twemproxy does not replicate SETs (it sends each key to the one
server that owns it by consistent hashing) while archlab replicates every SET to all servers.
So:
1. gets: two servers, single-key gets. twemproxy sends each to the key's owner, archlab to a
   server chosen round-robin: one server request per client request in both.
2. sets: ONE server behind both proxies, so that archlab's replication is the same single write.
3. multi-gets: two servers, 9-key gets (the seed's largest); archlab with `--sharded true`,
   twemproxy fragmenting by key owner: one request per server in both, merged in key order.
4. added latency: one connection, gets, closed model: the generator's p50 and p99 through each
   proxy minus those of the same gets sent to memcached directly in the same repetition.
Targets: archlab >= 1.0x twemproxy in requests/s per proxy core; moonshot 2x.

usage: .venv/bin/python bench/middleware_peers.py [--reps 10] [--duration 5] [--connections 32]
       [--archs event-loop,seed] [--workers 8] [--only gets,sets,multiget,latency]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_peers import ENGINE, ROOT, free_port, missing_prerequisite, parse_arguments  # noqa: E402
import harness  # noqa: E402
from harness import chosen_parts  # noqa: E402
from load_peers import memcached  # noqa: E402

NUTCRACKER = "nutcracker"  # Debian package nutcracker (twemproxy)
MC_KEYS = 10_000
VALUE_BYTES = 1024
MULTI_GET_KEYS = 9
PARTS = ("gets", "sets", "multiget", "latency")
RESULTS = ROOT / "bench" / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BOOTSTRAP_RESAMPLES = 10_000

NUTCRACKER_CONF = """\
bench:
  listen: 127.0.0.1:{port}
  hash: fnv1a_64
  distribution: ketama
  timeout: 1000
  preconnect: true
  auto_eject_hosts: false
  server_connections: 1
  servers:
{servers}
"""


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of `pid`, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_accepting(port: int, proc: subprocess.Popen, what: str) -> None:
    import socket

    deadline = time.monotonic() + 10
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not accept connections within 10 s") from None
            time.sleep(0.05)


@contextmanager
def stopping(proc: subprocess.Popen):
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def twemproxy(servers: list[str], cpu: int):
    """nutcracker with a generated YAML: the memcache protocol, ketama over `servers`, one
    connection per server (its default), pinned to `cpu`. Yields (target, pid)."""
    with tempfile.TemporaryDirectory(prefix="archlab-twemproxy-") as d:
        port, stats_port = free_port(), free_port()
        conf = Path(d) / "nutcracker.yml"
        conf.write_text(NUTCRACKER_CONF.format(port=port, servers="\n".join(f"   - {s}:1" for s in servers)))
        cmd = ["taskset", "-c", str(cpu), NUTCRACKER, "-c", str(conf), "-s", str(stats_port), "-a", "127.0.0.1",
               "-o", str(Path(d) / "nutcracker.log")]
        with stopping(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)) as p:
            wait_accepting(port, p, "nutcracker")
            yield f"127.0.0.1:{port}", p.pid


@contextmanager
def archlab_middleware(servers: list[str], cpu: int, arch: str, workers: int, sharded: bool):
    """`archlab-engine middleware` pinned to `cpu`. Yields (target, pid)."""
    cmd = [str(ENGINE), "middleware", "--servers", ",".join(servers), "--arch", arch, "--sharded", str(sharded).lower(),
           "--cpus", str(cpu), "--port", "0", "--window", "60s"]
    if arch != "event-loop":
        cmd += ["--workers", str(workers)]
    with stopping(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)) as p:
        line = p.stdout.readline().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"archlab-engine middleware: unexpected first line {line!r}: {p.stderr.read()}")
        yield line.split()[1], p.pid


def preload(target: str, cpu: int) -> None:
    """Set every key once (parallel key pattern: 4 connections walk disjoint slices)."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "1:0", "--key-pattern", "P:P",
             "--key-max", str(MC_KEYS - 1), "--data-size", str(VALUE_BYTES), "--connections", "4", "--duration", "1s",
             "--warmup", "0s", "--cpus", str(cpu), "--quiet", "--json", str(Path(d) / "s.json")],
            capture_output=True, text=True, check=True, timeout=60,
        )


def load(target: str, cpu: int, pid: int | None, workload: list[str], connections: int, duration: int) -> dict:
    """One closed-model run; the proxy's CPU time is sampled at the measurement window's edges."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        cmd = [str(ENGINE), "load", "--protocol", "memcached", "--target", target, *workload, "--key-max", str(MC_KEYS - 1),
               "--data-size", str(VALUE_BYTES), "--connections", str(connections), "--duration", f"{duration}s",
               "--warmup", "1s", "--cpus", str(cpu), "--quiet", "--json", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cpu_at = {}
        for line in proc.stdout:
            phase = line.strip().removeprefix("phase ")
            if phase in ("measure", "end") and pid is not None:
                cpu_at[phase] = cpu_seconds(pid)
        if proc.wait(duration + 60) != 0:
            raise RuntimeError(f"archlab-engine load failed: {proc.stderr.read()}")
        doc = json.loads(out.read_text())
    if doc["errors"]["total"]:
        raise RuntimeError(f"errors through {target}: {doc['errors']}")
    requests = doc["requests"]
    result = {"rps": float(doc["throughput_rps"]), "p50_us": doc["latency_us"]["p50"], "p99_us": doc["latency_us"]["p99"]}
    if pid is not None and len(cpu_at) == 2 and requests:
        result["cpu_us_per_request"] = (cpu_at["end"] - cpu_at["measure"]) / requests * 1e6
    return result


def bootstrap_median_ci(values: list[float], seed: int = 2017) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of `values`."""
    rng = np.random.default_rng(seed)
    v = np.asarray(values)
    medians = np.median(rng.choice(v, size=(BOOTSTRAP_RESAMPLES, len(v)), replace=True), axis=1)
    lo, hi = np.percentile(medians, [2.5, 97.5])
    return float(lo), float(hi)


def alternate(names: list[str], reps: int, run_one) -> dict[str, list[dict]]:
    """Run every contender once per repetition, the order rotated each time."""
    results: dict[str, list[dict]] = {n: [] for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(run_one(name))
        line = "   ".join(f"{n} {results[n][-1]['rps']:9,.0f}/s" for n in names)
        print(f"  rep {rep + 1:2}: {line}", flush=True)
    return results


def summarise(title: str, results: dict[str, list[dict]], peer: str = "twemproxy") -> dict:
    print(f"  {title}: medians over {len(results[peer])} repetitions")
    summary = {}
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        cpus = [r["cpu_us_per_request"] for r in runs if "cpu_us_per_request" in r]
        cpu = statistics.median(cpus) if cpus else None
        entry = {"rps": rps, "cpu_us_per_request": cpu, "runs": runs}
        text = f"    {name:<22} {rps:10,.0f} req/s"
        if cpu:
            text += f"   {cpu:6.2f} us CPU/request (= {1e6 / cpu:9,.0f} req/s per core)"
        if name != peer:
            ratios = [a["rps"] / b["rps"] for a, b in zip(runs, results[peer])]
            med, (lo, hi) = statistics.median(ratios), bootstrap_median_ci(ratios)
            entry["ratio"] = {"median": med, "ci95": [lo, hi]}
            verdict = "meets" if med >= 1.0 else "MISSES"
            text += f"   ratio to {peer} {med:.2f} [{lo:.2f}, {hi:.2f}] ({verdict} >= 1.0; moonshot 2.0)"
            pc = [b["cpu_us_per_request"] / a["cpu_us_per_request"] for a, b in zip(runs, results[peer])
                  if "cpu_us_per_request" in a and "cpu_us_per_request" in b and a["cpu_us_per_request"] > 0]
            if pc:
                pmed, (plo, phi) = statistics.median(pc), bootstrap_median_ci(pc)
                entry["per_core_ratio"] = {"median": pmed, "ci95": [plo, phi]}
                text += f"; per core (CPU/request) {pmed:.2f} [{plo:.2f}, {phi:.2f}]"
        print(text)
        summary[name] = entry
    return summary


def main() -> int:
    a = parse_arguments(__doc__, extra=_extra_options)
    parts = chosen_parts(a.only, PARTS)
    if parts is None:
        return 2
    archs = a.archs.split(",")
    allowed = ("seed", "ring", "actor", "event-loop")
    if bad := [x for x in archs if x not in allowed]:
        print(f"bench: --archs takes {','.join(allowed)}; got {','.join(bad)}", file=sys.stderr)
        return 2
    if a.reps < 10:
        print(f"bench: note: --reps {a.reps} is below the 10 the targets are judged on", file=sys.stderr)
    if why := missing_prerequisite(("taskset", "memcached", NUTCRACKER)):
        if NUTCRACKER in why:
            why = "nutcracker is missing (Debian package nutcracker; make bench-middleware installs it)"
        print(f"bench: {why}", file=sys.stderr)
        return 1
    pc, gc, n, d = a.server_cpu, a.client_cpu, a.connections, a.duration
    print(f"proxies on CPU {pc}, generator on CPU {gc}, memcached servers on both; {n} connections, {d} s per "
          f"measurement, {a.reps} alternating repetitions; archlab archs: {', '.join(archs)} "
          f"(workers {a.workers} where they apply); {VALUE_BYTES} B values, {MC_KEYS:,} keys")
    report: dict = {"settings": vars(a)}
    both = f"{pc},{gc}"
    with ExitStack() as stack:
        servers = [stack.enter_context(memcached(both)) for _ in range(2)]
        for s in servers:
            preload(s, gc)

        def contenders(part: ExitStack, behind: list[str], sharded: bool) -> dict[str, tuple[str, int | None]]:
            """twemproxy and every archlab architecture in front of `behind`, until `part` ends."""
            procs = {"twemproxy": part.enter_context(twemproxy(behind, pc))}
            for arch in archs:
                procs[f"archlab {arch}"] = part.enter_context(archlab_middleware(behind, pc, arch, a.workers, sharded))
            return procs

        def compare(title: str, procs: dict[str, tuple[str, int | None]], workload: list[str]) -> dict:
            print(f"\n{title}", flush=True)
            results = alternate(list(procs), a.reps, lambda name: load(procs[name][0], gc, procs[name][1], workload, n, d))
            return summarise(title.split(":")[0], results)

        if "gets" in parts:
            with ExitStack() as part:
                report["gets"] = compare("1. gets: 2 servers, single-key gets, archlab round-robin vs twemproxy ketama",
                                         contenders(part, servers, False), ["--ratio", "0:1"])
        if "sets" in parts:
            with ExitStack() as part:
                report["sets"] = compare("2. sets: 1 server behind both (twemproxy does not replicate)",
                                         contenders(part, servers[:1], False), ["--ratio", "1:0"])
        if "multiget" in parts:
            with ExitStack() as part:
                report["multiget"] = compare(
                    f"3. multi-gets: 2 servers, {MULTI_GET_KEYS}-key gets, archlab --sharded true vs twemproxy fragments",
                    contenders(part, servers, True), ["--ratio", f"0:{MULTI_GET_KEYS}", "--multi-get", str(MULTI_GET_KEYS)])
        if "latency" in parts:
            with ExitStack() as part:
                procs = {"direct": (servers[0], None), **contenders(part, servers[:1], False)}
                print("\n4. added latency: 1 connection, gets, closed model; contender minus direct memcached, "
                      "same repetition (1 server)", flush=True)
                results = alternate(list(procs), a.reps,
                                    lambda name: load(procs[name][0], gc, procs[name][1], ["--ratio", "0:1"], 1, d))
                latency = {}
                for name in procs:
                    if name == "direct":
                        continue
                    added = {q: [r[q] - b[q] for r, b in zip(results[name], results["direct"])] for q in ("p50_us", "p99_us")}
                    latency[name] = {q: statistics.median(v) for q, v in added.items()}
                    print(f"    {name:<22} adds p50 {latency[name]['p50_us']:7.1f} us   p99 {latency[name]['p99_us']:7.1f} us "
                          f"(direct p50 {statistics.median(r['p50_us'] for r in results['direct']):.1f} us)")
                report["latency"] = {"added_us": latency, "runs": results}
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "middleware_peers.json"
    out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nraw repetitions: {out.relative_to(ROOT)}")
    return 0


def _extra_options(ap) -> None:
    ap.set_defaults(reps=10, connections=32)
    ap.add_argument("--only", metavar="PARTS", help=f"comma-separated subset of {','.join(PARTS)} (default: all)")
    ap.add_argument("--archs", default="event-loop,seed", help="archlab architectures to compare (default event-loop,seed)")
    ap.add_argument("--workers", type=harness.count(), default=8, help="workers of the hand-off architectures (default 8)")


if __name__ == "__main__":
    harness.run_main(main)
