"""Benchmark the link emulator's own cost: what `archlab-engine link` at zero configured delay
adds to a server and its client, against the same two network namespaces joined by a veth pair
with no emulation (same 1500-byte MTU), and against loopback for reference.

Contenders, alternating in every repetition (the order rotates) so that drift of the machine
hits all alike:
  link      two namespaces joined by `archlab-engine link --name ...` (nothing configured;
            its forwarding threads unpinned, real-time as by default)
  veth      two namespaces joined by a veth pair, addresses as the link's (10.200.0.1/.2)
  loopback  server and client on 127.0.0.1 of the host's namespace (64 KiB MTU)

The same peers run on each: `archlab-engine serve --arch single-thread` pinned to the server
CPU in the server namespace, wrk (one thread) pinned to the client CPU in the client namespace
(`ip netns exec`), on the quickstart workloads (`/prime?n=27059`, `/echo?size=1024`) and on
seed 001's large response (`/response?size=102400`). Latency: `archlab-engine load` with one
connection and `--busy-poll` against the same server on `/echo?size=16`, so that the client's
own wake-up is not in the figure; its service-time p50 and p99 per contender, and the link's
added latency as link minus veth; once back to back and once with 1 ms of think time between
requests, where the forwarding threads fall asleep between packets (an idle link's cost). For the link, the forwarder's packets per second and its CPU
time per packet come from its `stats` lines (SIGUSR1 before and after each run).

Targets (issue 18): at 0 ms configured the link adds < 20 us p50, and forwards the server's
full loopback throughput (link / loopback >= 0.95) for the quickstart workloads.

Every namespace and device created here is named `alk-bench-...`; all are removed at the end,
also on error or Ctrl-C.

usage: .venv/bin/python bench/link_overhead.py [--reps 5] [--duration 5] [--connections 64]
       [--server-cpu 1] [--client-cpu 0] [--only throughput,latency]
"""

from __future__ import annotations

import json
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
from http_peers import ENGINE, missing_prerequisite, parse_arguments  # noqa: E402

CLIENT_ADDR, SERVER_ADDR = "10.200.0.1", "10.200.0.2"
WORKLOADS = ["/prime?n=27059", "/echo?size=1024", "/response?size=102400"]
LATENCY_PATH = "/echo?size=16"
CONTENDERS = ("link", "veth", "loopback")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class Topology:
    """Where the server and the client run: command prefixes and the server's address."""

    name: str
    server_prefix: list[str]
    client_prefix: list[str]
    server_host: str
    link: "LinkProcess | None" = None


class LinkProcess:
    """A running `archlab-engine link`, its stdout read line by line on a thread."""

    def __init__(self, name: str, extra: list[str]):
        self.proc = subprocess.Popen([str(ENGINE), "link", "--name", name, *extra], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self.next("ready")

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")

    def next(self, kind: str) -> dict:
        line = self.lines.get(timeout=30)
        if not line.startswith(kind + " "):
            raise RuntimeError(f"archlab-engine link: expected a {kind} line, got {line!r}: {self.proc.stderr.read()}")
        return json.loads(line.split(" ", 1)[1])

    def stats(self) -> dict:
        self.proc.send_signal(signal.SIGUSR1)
        return self.next("stats")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


LINK_FLAGS: list[str] = []


@contextmanager
def emulated_link():
    link = LinkProcess("bench-link", LINK_FLAGS)
    try:
        c, s = link.ready["client"]["netns"], link.ready["server"]["netns"]
        yield Topology("link", ["ip", "netns", "exec", s], ["ip", "netns", "exec", c], SERVER_ADDR, link)
    finally:
        link.stop()


@contextmanager
def veth_pair():
    c, s = "alk-bench-veth-client", "alk-bench-veth-server"
    try:
        ip("netns", "add", c)
        ip("netns", "add", s)
        ip("link", "add", "alk-vc", "netns", c, "mtu", "1500", "type", "veth", "peer", "name", "alk-vs",
           "netns", s, "mtu", "1500")
        for ns, dev, addr, peer in ((c, "alk-vc", CLIENT_ADDR, SERVER_ADDR), (s, "alk-vs", SERVER_ADDR, CLIENT_ADDR)):
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", f"{addr}/32", "peer", f"{peer}/32", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        yield Topology("veth", ["ip", "netns", "exec", s], ["ip", "netns", "exec", c], SERVER_ADDR)
    finally:
        for ns in (c, s):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@contextmanager
def loopback():
    yield Topology("loopback", [], [], "127.0.0.1")


TOPOLOGIES = {"link": emulated_link, "veth": veth_pair, "loopback": loopback}


@contextmanager
def server(topo: Topology, cpu: int):
    """single-thread in the server's place, pinned; yields HOST:PORT once it listens."""
    proc = subprocess.Popen([*topo.server_prefix, str(ENGINE), "serve", "--arch", "single-thread", "--host",
                             topo.server_host, "--port", "0", "--cpus", str(cpu)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("listening "):
            raise RuntimeError(f"serve in {topo.name}: unexpected first line {line!r}: {proc.stderr.read()}")
        yield line.split()[1]
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wrk(topo: Topology, target: str, path: str, cpu: int, connections: int, duration: int) -> float:
    out = subprocess.run(
        [*topo.client_prefix, "taskset", "-c", str(cpu), "wrk", "-t1", f"-c{connections}", f"-d{duration}s",
         f"http://{target}{path}"],
        capture_output=True, text=True, check=True, timeout=duration + 30,
    ).stdout
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(f"cannot read wrk output:\n{out}")


THINK_TIMES = ("0ms", "1ms")


def ping_pong(topo: Topology, target: str, cpu: int, duration: int, think: str) -> tuple[float, float]:
    """Service-time p50 and p99 (us) of one busy-polling connection."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [*topo.client_prefix, str(ENGINE), "load", "--target", target, "--path", LATENCY_PATH,
             "--connections", "1", "--duration", f"{duration}s", "--warmup", "1s", "--cpus", str(cpu),
             "--busy-poll", "--think-time", think, "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 30,
        )
        s = json.loads(out.read_text())["service_time_us"]
        return float(s["p50"]), float(s["p99"])


@dataclass
class LinkCost:
    packets_per_s: list[float] = field(default_factory=list)
    cpu_us_per_packet: list[float] = field(default_factory=list)


def forwarder_cost(before: dict, after: dict) -> tuple[float, float]:
    packets = sum(after[d]["packets_out"] - before[d]["packets_out"] for d in ("up", "down"))
    seconds = after["elapsed_s"] - before["elapsed_s"]
    cpu = sum(after["rusage"][k] - before["rusage"][k] for k in ("user_cpu_s", "system_cpu_s"))
    return packets / seconds, cpu / max(packets, 1) * 1e6


def main() -> int:
    def extra(ap):
        ap.add_argument("--only", default="throughput,latency", help="comma-separated parts: throughput, latency")
        ap.add_argument("--link-flags", default="", help="extra flags of archlab-engine link, e.g. '--cpus-up 0'")

    a = parse_arguments(__doc__, extra)
    LINK_FLAGS.extend(a.link_flags.split())
    parts = set(a.only.split(","))
    if not parts or parts - {"throughput", "latency"}:
        print(f"bench: --only takes throughput and/or latency, got {a.only!r}", file=sys.stderr)
        return 2
    if why := missing_prerequisite(("wrk", "taskset", "ip")):
        print(f"bench: {why}", file=sys.stderr)
        return 1
    sc, cc, n, d = a.server_cpu, a.client_cpu, a.connections, a.duration
    print(f"server on CPU {sc}, client on CPU {cc}, wrk -t1 -c{n}, {d} s per measurement, {a.reps} rotating "
          f"repetitions; link at 0 ms configured vs veth (MTU 1500) vs loopback")
    rps = {(w, c): [] for w in WORKLOADS for c in CONTENDERS}
    lat = {(c, z): [] for c in CONTENDERS for z in THINK_TIMES}
    cost = {w: LinkCost() for w in WORKLOADS}
    for rep in range(a.reps):
        order = CONTENDERS[rep % 3:] + CONTENDERS[:rep % 3]
        for name in order:
            with TOPOLOGIES[name]() as topo, server(topo, sc) as target:
                for w in WORKLOADS if "throughput" in parts else []:
                    before = topo.link.stats() if topo.link else None
                    r = wrk(topo, target, w, cc, n, d)
                    rps[(w, name)].append(r)
                    if topo.link:
                        pps, cpu = forwarder_cost(before, topo.link.stats())
                        cost[w].packets_per_s.append(pps)
                        cost[w].cpu_us_per_packet.append(cpu)
                for think in THINK_TIMES if "latency" in parts else ():
                    lat[(name, think)].append(ping_pong(topo, target, cc, d, think))
        if "throughput" in parts:
            print(f"  rep {rep + 1}: " + "   ".join(
                f"{w} " + " ".join(f"{c} {rps[(w, c)][-1]:,.0f}" for c in CONTENDERS) for w in WORKLOADS))
        if "latency" in parts:
            for z in THINK_TIMES:
                print(f"  rep {rep + 1}: latency p50/p99 us, think {z}: " + "   ".join(
                    f"{c} {lat[(c, z)][-1][0]:.1f}/{lat[(c, z)][-1][1]:.1f}" for c in CONTENDERS))

    med = statistics.median
    if "throughput" in parts:
        print("\nthroughput, req/s (medians)")
        print(f"  {'workload':24} {'link':>10} {'veth':>10} {'loopback':>10} {'link/veth':>10} {'link/lo':>9}"
              f" {'link pkt/s':>11} {'CPU us/pkt':>11}")
        for w in WORKLOADS:
            m = {c: med(rps[(w, c)]) for c in CONTENDERS}
            print(f"  {w:24} {m['link']:10,.0f} {m['veth']:10,.0f} {m['loopback']:10,.0f} "
                  f"{m['link'] / m['veth']:10.3f} {m['link'] / m['loopback']:9.3f} "
                  f"{med(cost[w].packets_per_s):11,.0f} {med(cost[w].cpu_us_per_packet):11.2f}")
        quick = [w for w in WORKLOADS if w != "/response?size=102400"]
        worst = min(med(rps[(w, 'link')]) / med(rps[(w, 'loopback')]) for w in quick)
        verdict = "meets" if worst >= 0.95 else "MISSES"
        print(f"  quickstart workloads: link / loopback throughput >= {worst:.3f} ({verdict} the target >= 0.95)")
    if "latency" in parts:
        print(f"\nlatency of {LATENCY_PATH}, one busy-polling connection, service time us (medians)")
        for z in THINK_TIMES:
            p50 = {c: med(x[0] for x in lat[(c, z)]) for c in CONTENDERS}
            p99 = {c: med(x[1] for x in lat[(c, z)]) for c in CONTENDERS}
            print(f"  think time {z}: " + "   ".join(f"{c} p50 {p50[c]:.1f} p99 {p99[c]:.1f}" for c in CONTENDERS))
            added50, added99 = p50["link"] - p50["veth"], p99["link"] - p99["veth"]
            verdict = ("meets" if added50 < 20 else "MISSES") if z == "0ms" else "for reference"
            print(f"    link adds p50 {added50:+.1f} us, p99 {added99:+.1f} us over veth "
                  f"({verdict}: target < 20 us p50 back to back)")
    return 0


if __name__ == "__main__":
    harness.run_main(main)
