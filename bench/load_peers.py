"""Benchmark archlab's load generator against its peers, in one run on one machine.

Servers are pinned to one CPU and generators to the other; the comparisons use the harness's
method (``bench/harness.py``: one warm-up each, then ``--reps`` alternating repetitions, the median
of per-pair ratios with a bootstrap 95% interval, met only when the interval clears the target).
Traffic stays on 127.0.0.1. The nginx, wrk and `archlab-engine load` plumbing is
`bench/http_peers.py`'s, with its equal warm-up for wrk. Results: ``bench/results/load_peers.json``.

1. Closed model, HTTP: `archlab-engine load` vs wrk (-t1), both driving nginx (1 worker).
   Target: >= 1.0x wrk requests/s per generator core.
2. Open model with raw records on (`--records`), at 0.75x wrk's median closed rate: the rate
   achieved. Target: >= 0.75x wrk's closed rate.
3. memcached: `archlab-engine load --protocol memcached` vs memcslap (Debian libmemcached-tools
   1.1.4), gets only, with as many connections as memcslap has threads (--mc-connections), on
   the same memcached (1 thread). memcslap chooses its own values: measured here, not assumed,
   from memcached's own `stats` around each run (bytes written per get, net of the 8-byte
   STORED replies of memcslap's load phase; its key count from `curr_items`). archlab's
   generator then gets the same key count and value sizes: its keys are preloaded with
   `--data-size uniform:50-5000` (what memcslap 1.1.4 was measured to send: values of 50 to
   5000 bytes, about 2,600 bytes per get), and the per-get bytes of both are printed side by
   side so an unequal load shows. Both rates are gets/s of one generator core (memcslap's from
   its own "Time to get" line, so its load phase is left out) and, per byte, MB/s of responses.
   Target: >= 1.0x memcslap.
4. Added latency: what the generator adds to a request, measured against a server that records
   its own service time. The server (this file, `timestamp-server`) is a busy-polling Python
   loop on one connection, pinned to the server CPU; it takes CLOCK_MONOTONIC right after `recv`
   returns a request and right after `send` of the reply returns. The generator (closed model,
   one connection, raw records on) keeps each request's sent and done times on the same clock
   (records' t0 + offset), so every request is matched exactly: added = (done - sent) - (server
   send - server receive). That includes the loopback kernel path both ways, which every
   generator pays, so it is an upper bound of the generator's own share. Busy-polling removes the
   server's wake-up latency from the figure. Target: p50 < 10 us.

usage: .venv/bin/python bench/load_peers.py [--reps 20] [--duration 1] [--warmup 1] [--connections 64]
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
import harness  # noqa: E402
from http_peers import (  # noqa: E402
    ENGINE,
    _seconds,
    archlab_load,
    compare,
    free_port,
    missing_prerequisite,
    nginx,
    parse_arguments,
    peer_versions,
    wrk,
)

MEMCACHED = "/usr/bin/memcached"
MEMCSLAP = "memcslap"  # Debian package libmemcached-tools
# memcslap 1.1.4 draws each value's length between these (measured: about 2,600 bytes per get
# with the response framing); archlab's generator is given the same range.
MEMCSLAP_VALUE_SIZES = "uniform:50-5000"
STORED_REPLY_BYTES = len(b"STORED\r\n")
PARTS = ("closed", "open", "memcached", "latency")


def archlab_open(url: str, cpu: int, connections: int, duration: float, rate: float) -> float:
    """Achieved rate of an open-model run with raw records streamed to a temporary file."""
    hostport, _, path = url.removeprefix("http://").partition("/")
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--target", hostport, "--path", "/" + path, "--model", "open",
             "--rate", str(rate), "--connections", str(connections), "--duration", _seconds(duration),
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


def memcached_stats(target: str) -> dict[str, int]:
    """memcached's own counters (`stats`), read over one short connection."""
    host, port = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                raise RuntimeError("memcached closed the connection during stats")
            data += chunk
    stats = {}
    for line in data.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].isdigit():
            stats[parts[1]] = int(parts[2])
    return stats


def bytes_per_get(before: dict[str, int], after: dict[str, int]) -> float:
    """Response bytes memcached wrote per get between two `stats`, net of STORED replies."""
    gets = after["cmd_get"] - before["cmd_get"]
    sets = after["cmd_set"] - before["cmd_set"]
    written = after["bytes_written"] - before["bytes_written"] - STORED_REPLY_BYTES * sets
    return written / gets if gets else float("nan")


def preload(target: str, cpu: int, keys: int) -> None:
    """Set every key of the gets' range once (sequential keys, memcslap's value sizes)."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "1:0", "--key-pattern", "S:S",
             "--key-max", str(keys - 1), "--data-size", MEMCSLAP_VALUE_SIZES, "--connections", "1",
             "--duration", "2s", "--warmup", "0s", "--cpus", str(cpu), "--quiet", "--json", str(Path(d) / "s.json")],
            capture_output=True, text=True, check=True, timeout=60,
        )


def archlab_gets(target: str, cpu: int, connections: int, duration: float, warmup: float, keys: int) -> harness.Sample:
    """Gets per second of the closed model, gets only, over the preloaded keys; the sample's
    extra carries memcached's bytes per get and response MB/s over the whole run."""
    before = memcached_stats(target)
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        subprocess.run(
            [str(ENGINE), "load", "--protocol", "memcached", "--target", target, "--ratio", "0:1",
             "--key-max", str(keys - 1), "--data-size", MEMCSLAP_VALUE_SIZES, "--connections", str(connections),
             "--duration", _seconds(duration), "--warmup", _seconds(warmup), "--cpus", str(cpu), "--quiet",
             "--json", str(out)],
            capture_output=True, text=True, check=True, timeout=duration + warmup + 30,
        )
        doc = json.loads(out.read_text())
    after = memcached_stats(target)
    if doc["errors"]["total"]:
        raise RuntimeError(f"archlab memcached run had errors: {doc['errors']}")
    if after["get_misses"] > before["get_misses"]:
        raise RuntimeError(f"archlab's gets missed {after['get_misses'] - before['get_misses']} keys: preload failed")
    per_get = bytes_per_get(before, after)
    rate = float(doc["throughput_rps"])
    cpu_s = sum(t["user_s"] + t["sys_s"] for t in doc["generator"]["thread_cpu"])
    return harness.Sample(rate, float(doc["responses"]), cpu_s, {"bytes_per_get": per_get,
                                                                  "response_mb_per_s": rate * per_get / 1e6})


def memcslap_gets(target: str, cpu: int, threads: int, per_thread: int) -> harness.Sample:
    """memcslap --test=get: it loads its keys, then each thread gets them; gets per second of
    the get phase, from its own 'Time to get N keys by T threads: S seconds' line."""
    before = memcached_stats(target)
    cpu_before = harness.children_cpu_s()
    out = subprocess.run(
        ["taskset", "-c", str(cpu), MEMCSLAP, f"--servers={target}", "--test=get", f"--concurrency={threads}",
         f"--execute-number={per_thread}"],
        capture_output=True, text=True, check=True, timeout=600,
    ).stdout
    cpu_s = harness.children_cpu_s() - cpu_before
    after = memcached_stats(target)
    m = re.search(r"Time to get\s+(\d+) keys by\s+(\d+) threads:\s+([\d.]+) seconds", out)
    if not m:
        raise RuntimeError(f"cannot read memcslap output:\n{out}")
    gets = int(m.group(1))
    rate = gets / float(m.group(3))
    per_get = bytes_per_get(before, after)
    # CPU per get includes memcslap's load phase (it cannot be timed apart): an upper bound.
    return harness.Sample(rate, float(gets), cpu_s, {"bytes_per_get": per_get, "response_mb_per_s": rate * per_get / 1e6,
                                                      "keys_loaded": after["total_items"] - before["total_items"]})


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


def added_latency(cpus: tuple[int, int], duration: float, busy_poll: bool) -> tuple[float, float, int, int]:
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
                [str(ENGINE), "load", "--target", f"127.0.0.1:{port}", "--connections", "1", "--duration", _seconds(duration),
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
    sc, cc, n, d, w = a.server_cpu, a.client_cpu, a.connections, a.duration, a.warmup
    print(f"servers on CPU {sc}, generators on CPU {cc}, {n} connections, {d:g} s per measurement after {w:g} s of "
          f"warm-up, {a.reps} alternating repetitions")

    facts = harness.machine_facts({**peer_versions(),
                                   "memcslap": "libmemcached-tools " + debian_version("libmemcached-tools"),
                                   "memcached": harness.tool_version([MEMCACHED, "-V"])})
    table: list[dict] = []
    raw: dict = {}
    if parts & {"closed", "open"}:
        with nginx(sc) as url:
            wrk_rates = []

            def wrk_run():
                r = wrk(url, cc, n, d, w)
                wrk_rates.append(r.value)
                return r

            closed = compare("1. closed model: archlab-engine load vs wrk, both driving nginx",
                             "archlab-load", lambda: archlab_load(url, cc, n, d, w), "wrk", wrk_run, a.reps, 1.0)
            table += closed["rows"]
            raw["closed"] = closed["raw"]
            if "open" in parts:
                closed_rate = statistics.median(wrk_rates)
                rate = 0.75 * closed_rate
                achieved = [archlab_open(url, cc, n, d, rate) for _ in range(a.reps)]
                ratio = statistics.median(achieved) / closed_rate
                print(f"\n2. open model with raw records at {rate:,.0f}/s (0.75x wrk's {closed_rate:,.0f}/s): achieved "
                      f"median {statistics.median(achieved):,.0f}/s over {a.reps} runs -> {ratio:.3f}x wrk "
                      f"({'meets' if ratio >= 0.75 * 0.99 else 'MISSES'} the target >= 0.75)")
                table.append({"comparison": "2. open model", "offered_rps": rate, "achieved_rps": achieved,
                              "ratio_to_wrk_closed": ratio})

    if "memcached" in parts:
        with memcached(sc) as target:
            # One untimed memcslap run loads its keys and shows what it sends; archlab's key
            # space is then memcslap's key count, its values the same size range.
            probe = memcslap_gets(target, cc, a.mc_connections, 1000)
            keys = memcached_stats(target)["curr_items"]
            preload(target, cc, keys)
            # memcslap runs a count, not a time: per thread, about what archlab gets done in d s
            # at the rate of a first short run, so both measure windows of similar length.
            per_thread = max(1000, int(archlab_gets(target, cc, a.mc_connections, 1, 0, keys).value * d
                                       / a.mc_connections))
            print(f"\nmemcslap loaded {keys:,} keys; its gets carried {probe.extra['bytes_per_get']:,.0f} bytes each")
            mc = compare(f"3. memcached gets ({MEMCSLAP_VALUE_SIZES} B values, {keys:,} keys, {a.mc_connections} "
                         "connections): archlab-engine load vs memcslap, same memcached",
                         "archlab-load", lambda: archlab_gets(target, cc, a.mc_connections, d, w, keys),
                         "memcslap", lambda: memcslap_gets(target, cc, a.mc_connections, per_thread), a.reps, 1.0)
            for row in mc["rows"]:
                samples = [harness.Sample(**s) for s in mc["raw"][row["contender"]]]
                row["bytes_per_get"] = statistics.median(s.extra["bytes_per_get"] for s in samples)
                row["response_mb_per_s"] = statistics.median(s.extra["response_mb_per_s"] for s in samples)
                print(f"  {row['contender']:<14} {row['bytes_per_get']:,.0f} bytes per get, "
                      f"{row['response_mb_per_s']:,.1f} MB/s of responses")
            a_mb = [s["extra"]["response_mb_per_s"] for s in mc["raw"]["archlab-load"]]
            b_mb = [s["extra"]["response_mb_per_s"] for s in mc["raw"]["memcslap"]]
            per_byte = harness.median_ratio_interval(a_mb, b_mb)
            mc["rows"][0]["per_byte_ratio"] = per_byte
            print(f"  per byte: archlab-load / memcslap {per_byte}")
            table += mc["rows"]
            raw["memcached"] = mc["raw"]

    if "latency" in parts:
        print("\n4. added latency: generator service time minus the server's own, per request "
              "(closed model, 1 connection, busy-polling timestamping server)")
        # Both ways of waiting, alternating: sleeping (the default: in io_uring_enter with the
        # default `auto` backend where the kernel allows io_uring, else in epoll_wait; either
        # adds the thread's wake-up to every response) and `--busy-poll` (for latency
        # measurements).
        p50s: dict[bool, list[float]] = {False: [], True: []}
        for i in range(a.reps):
            for busy in (i % 2 == 1, i % 2 == 0):
                p50, p99, matched, total = added_latency((sc, cc), d, busy)
                p50s[busy].append(p50)
                mode = "--busy-poll" if busy else "sleeping"
                print(f"  rep {i + 1} {mode:<11}: p50 {p50:6.2f} us   p99 {p99:7.2f} us   "
                      f"({matched:,} of {total:,} requests matched)")
        for busy in (False, True):
            median = statistics.median(p50s[busy])
            mode = "--busy-poll" if busy else "sleeping"
            print(f"  median p50, {mode}: {median:.2f} us ({'meets' if median < 10 else 'MISSES'} the target < 10 us)")
            table.append({"comparison": "4. added latency", "mode": mode, "p50_us": p50s[busy], "median_p50_us": median})
    settings = {"reps": a.reps, "duration_s": d, "warmup_s": w, "connections": n, "server_cpu": sc, "client_cpu": cc,
                "mc_connections": a.mc_connections, "parts": sorted(parts)}
    print(f"\nresults: {harness.write_results('load_peers', table, facts, settings, raw)}")
    return 0


def debian_version(package: str) -> str:
    done = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _extra_options(ap) -> None:
    ap.add_argument("--only", metavar="PARTS", help=f"comma-separated subset of {','.join(PARTS)} (default: all)")
    ap.add_argument("--mc-connections", type=harness.count(), default=4, help="memcached: connections = memcslap threads (default 4)")


if __name__ == "__main__":
    harness.run_main(main)
