"""Benchmark archlab's load generator against its peers, in one run on one machine.

Servers are pinned to one CPU and generators to the other; contenders alternate in every
repetition so that drift of the machine hits both alike; medians and ratios of medians are
printed. Traffic stays on 127.0.0.1. The nginx, wrk and `archlab-engine load` plumbing is
`bench/http_peers.py`'s.

1. Closed model, HTTP: `archlab-engine load` vs wrk (-t1), both driving nginx (1 worker).
   Target: >= 1.0x wrk requests/s per generator core.
2. Open model with raw records on (`--records`), at 0.75x wrk's median closed rate: the rate
   achieved. Target: >= 0.75x wrk's closed rate.
3. memcached: `archlab-engine load --protocol memcached` vs memcslap (libmemcached-tools),
   both doing gets only of 400-byte values (memcslap's value size) preloaded into the same
   memcached (1 thread), with as many connections as memcslap has threads (--mc-connections).
   memcslap runs a fixed count per thread, archlab a fixed time; both give gets per second on one
   generator core. Target: >= 1.0x memcslap.
4. Added latency: what the generator adds to a request, measured against a server that records
   its own service time. The server (this file, `timestamp-server`) is a busy-polling Python
   loop on one connection, pinned to the server CPU; it takes CLOCK_MONOTONIC right after `recv`
   returns a request and right after `send` of the reply returns. The generator (closed model,
   one connection, raw records on) keeps each request's sent and done times on the same clock
   (records' t0 + offset), so every request is matched exactly: added = (done - sent) - (server
   send - server receive). That includes the loopback kernel path both ways, which every
   generator pays, so it is an upper bound of the generator's own share. Busy-polling removes the
   server's wake-up latency from the figure. Target: p50 < 10 us.

usage: .venv/bin/python bench/load_peers.py [--reps 5] [--duration 5] [--connections 64]
       [--only closed,open,memcached,latency] [--mc-connections 4]
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_peers import (  # noqa: E402
    ENGINE,
    archlab_load,
    compare,
    free_port,
    missing_prerequisite,
    nginx,
    parse_arguments,
    wrk,
)

MEMCACHED = "/usr/bin/memcached"
MEMCSLAP = "memcslap"  # Debian package libmemcached-tools
MEMCSLAP_VALUE_BYTES = 400  # memcslap's value length (its pairs_generate(..., 400))
MC_KEYS = 10_000
PARTS = ("closed", "open", "memcached", "latency")


def archlab_open(url: str, cpu: int, connections: int, duration: int, rate: float) -> float:
    """Achieved rate of an open-model run with raw records streamed to a temporary file."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--target", hostport, "--path", "/" + path, "--model", "open",
             "--rate", str(rate), "--connections", str(connections), "--duration", f"{duration}s",
             "--warmup", "1s", "--cpus", str(cpu), "--quiet", "--records", str(Path(d) / "run.rec"),
             "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 30,
        )
        return float(json.loads(out.read_text())["throughput_rps"])


@contextmanager
def memcached(cpu: int):
    port = free_port()
    proc = subprocess.Popen(
        ["taskset", "-c", str(cpu), MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1",
         "-m", "256", "-u", "nobody"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        import socket
        import time

        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("memcached did not start") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(5)


def archlab_memcached(target: str, cpu: int, connections: int, duration: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "1:10",
             "--key-max", "100000", "--data-size", "32", "--connections", str(connections),
             "--duration", f"{duration}s", "--warmup", "1s", "--cpus", str(cpu), "--quiet", "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 30,
        )
        return float(json.loads(out.read_text())["throughput_rps"])


def preload(target: str, cpu: int) -> None:
    """Set every key of the gets' range once (sequential keys, memcslap's value size)."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "1:0", "--key-pattern", "S:S",
             "--key-max", str(MC_KEYS - 1), "--data-size", str(MEMCSLAP_VALUE_BYTES), "--connections", "1",
             "--duration", "1s", "--warmup", "0s", "--cpus", str(cpu), "--quiet", "--json", str(Path(d) / "s.json")],
            capture_output=True, text=True, check=True, timeout=60,
        )


def archlab_gets(target: str, cpu: int, connections: int, duration: int) -> float:
    """Gets per second of the closed model, gets only, over the preloaded keys."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "0:1",
             "--key-max", str(MC_KEYS - 1), "--data-size", str(MEMCSLAP_VALUE_BYTES), "--connections", str(connections),
             "--duration", f"{duration}s", "--warmup", "1s", "--cpus", str(cpu), "--quiet", "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + 30,
        )
        doc = json.loads(out.read_text())
        if doc["errors"]["total"]:
            raise RuntimeError(f"archlab memcached run had errors: {doc['errors']}")
        return float(doc["throughput_rps"])


def memcslap_gets(target: str, cpu: int, threads: int, per_thread: int) -> float:
    """memcslap --test=get: it loads its keys, then each thread gets them; gets per second of
    the get phase, from its own 'Time to get N keys by T threads: S seconds' line."""
    out = subprocess.run(
        ["taskset", "-c", str(cpu), MEMCSLAP, f"--servers={target}", "--test=get", f"--concurrency={threads}",
         f"--execute-number={per_thread}"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    m = re.search(r"Time to get\s+(\d+) keys by\s+(\d+) threads:\s+([\d.]+) seconds", out)
    if not m:
        raise RuntimeError(f"cannot read memcslap output:\n{out}")
    return int(m.group(1)) / float(m.group(3))


# --- added latency ---------------------------------------------------------------------------

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def timestamp_server(out: str) -> None:
    """Serve one connection, busy-polling, and write (receive, send) CLOCK_MONOTONIC ns pairs of
    every request to ``out`` when the peer closes. Prints ``listening PORT`` first."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.setblocking(False)
    stamps = np.zeros(2 * 4_000_000, dtype=np.uint64)  # room for 4 M requests; then it stops recording
    n, buf, cap = 0, b"", len(stamps)
    clock = time.monotonic_ns
    while True:
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            continue
        except ConnectionResetError:  # the generator may reset its connections at the end
            break
        received = clock()
        if not data:
            break
        buf += data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            buf = buf[end + 4 :]
            conn.send(RESPONSE)
            sent = clock()
            if n + 2 <= cap:
                stamps[n], stamps[n + 1] = received, sent
                n += 2
    np.save(out, stamps[:n].reshape(-1, 2))


def added_latency(cpus: tuple[int, int], duration: int, busy_poll: bool) -> tuple[float, float, int, int]:
    """One run: (p50, p99 of the added latency in us, requests matched, requests recorded). With
    `busy_poll` the generator spins on its socket (`--busy-poll`) as the server does."""
    server_cpu, client_cpu = cpus
    with tempfile.TemporaryDirectory() as d:
        stamps_path = Path(d) / "server.npy"
        server = subprocess.Popen(
            ["taskset", "-c", str(server_cpu), sys.executable, __file__, "timestamp-server", str(stamps_path)],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )
        try:
            port = server.stdout.readline().split()[1]
            records = Path(d) / "run.rec"
            subprocess.run(
                [str(ENGINE), "load", "--target", f"127.0.0.1:{port}", "--connections", "1", "--duration", f"{duration}s",
                 "--warmup", "1s", "--cpus", str(client_cpu), "--quiet", "--records", str(records),
                 "--json", str(Path(d) / "s.json"), *(["--busy-poll"] if busy_poll else [])],
                capture_output=True, text=True, check=True, timeout=duration + 30,
            )
            server.wait(10)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
        stamps = np.load(stamps_path)
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
        from archlab.lab.rawrecords import RecordsFile

        rec = RecordsFile.open(records)
        gen = np.concatenate(list(rec.chunks())) if rec.count else np.zeros(0)
    t0 = np.uint64(rec.header.t0_mono_ns)
    ok = (gen["error"] == 0) & (gen["status"] == 200)
    sent, done = gen["sent_ns"][ok] + t0, gen["done_ns"][ok] + t0
    received, replied = stamps[:, 0], stamps[:, 1]
    # The server's receive of request i lies between its send and its completion at the generator.
    i = np.searchsorted(received, sent)
    found = i < len(received)
    i = np.where(found, i, 0)
    # Matched on the receive alone: on loopback the reply can reach a spinning generator before
    # the server's `send` returns and it reads the clock, so `replied` may pass `done`; such a
    # request then adds less than the server's own time (its added latency is small or negative)
    # and leaving it out would bias the figure upwards.
    found &= received[i] <= done
    added_ns = (done[found] - sent[found]).astype(np.int64) - (replied[i[found]] - received[i[found]]).astype(np.int64)
    p50, p99 = np.percentile(added_ns, [50, 99]) / 1000.0
    return float(p50), float(p99), int(found.sum()), int(gen.size)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "timestamp-server":
        timestamp_server(sys.argv[2])
        return 0
    a = parse_arguments(__doc__, extra=_extra_options)
    parts = set(a.only.split(",")) if a.only else set(PARTS)
    if unknown := parts - set(PARTS):
        print(f"bench: --only takes {','.join(PARTS)}; got {','.join(sorted(unknown))}", file=sys.stderr)
        return 2
    tools = ("taskset",) + (("wrk",) if parts & {"closed", "open"} else ()) + (("memcslap",) if "memcached" in parts else ())
    if why := missing_prerequisite(tools):
        print(f"bench: {why}", file=sys.stderr)
        return 1
    sc, cc, n, d = a.server_cpu, a.client_cpu, a.connections, a.duration
    print(f"servers on CPU {sc}, generators on CPU {cc}, {n} connections, {d} s per measurement, "
          f"{a.reps} alternating repetitions")

    if parts & {"closed", "open"}:
        with nginx(sc) as url:
            wrk_rates = []

            def wrk_run():
                r = wrk(url, cc, n, d)
                wrk_rates.append(r)
                return r

            compare("1. closed model: archlab-engine load vs wrk, both driving nginx",
                    "archlab-load", lambda: archlab_load(url, cc, n, d), "wrk", wrk_run, a.reps, 1.0)
            if "open" in parts:
                closed = statistics.median(wrk_rates)
                rate = 0.75 * closed
                achieved = [archlab_open(url, cc, n, d, rate) for _ in range(a.reps)]
                ratio = statistics.median(achieved) / closed
                print(f"\n2. open model with raw records at {rate:,.0f}/s (0.75x wrk's {closed:,.0f}/s): achieved "
                      f"{', '.join(f'{x:,.0f}' for x in achieved)} -> {ratio:.3f}x wrk "
                      f"({'meets' if ratio >= 0.75 * 0.99 else 'MISSES'} the target >= 0.75)")

    if "memcached" in parts:
        with memcached(sc) as target:
            preload(target, cc)
            # memcslap runs a count, not a time: per thread, about what archlab gets done in d s
            # at the rate of a first short run, so both measure windows of similar length.
            per_thread = max(1000, int(archlab_gets(target, cc, a.mc_connections, 1) * d / a.mc_connections))
            compare(f"3. memcached gets ({MEMCSLAP_VALUE_BYTES} B values, {a.mc_connections} connections): "
                    "archlab-engine load vs memcslap, same memcached",
                    "archlab-load", lambda: archlab_gets(target, cc, a.mc_connections, d),
                    "memcslap", lambda: memcslap_gets(target, cc, a.mc_connections, per_thread), a.reps, 1.0)

    if "latency" in parts:
        print("\n4. added latency: generator service time minus the server's own, per request "
              "(closed model, 1 connection, busy-polling timestamping server)")
        # Both ways of waiting, alternating: sleeping in epoll (the default, which adds the
        # thread's wake-up to every response) and `--busy-poll` (for latency measurements).
        p50s: dict[bool, list[float]] = {False: [], True: []}
        for i in range(a.reps):
            for busy in (i % 2 == 1, i % 2 == 0):
                p50, p99, matched, total = added_latency((sc, cc), d, busy)
                p50s[busy].append(p50)
                mode = "--busy-poll" if busy else "epoll sleep"
                print(f"  rep {i + 1} {mode:<11}: p50 {p50:6.2f} us   p99 {p99:7.2f} us   "
                      f"({matched:,} of {total:,} requests matched)")
        for busy in (False, True):
            median = statistics.median(p50s[busy])
            mode = "--busy-poll" if busy else "epoll sleep"
            print(f"  median p50, {mode}: {median:.2f} us ({'meets' if median < 10 else 'MISSES'} the target < 10 us)")
    return 0


def _extra_options(ap) -> None:
    ap.add_argument("--only", metavar="PARTS", help=f"comma-separated subset of {','.join(PARTS)} (default: all)")
    ap.add_argument("--mc-connections", type=int, default=4, help="memcached: connections = memcslap threads (default 4)")


if __name__ == "__main__":
    sys.exit(main())
