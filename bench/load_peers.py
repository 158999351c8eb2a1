"""Benchmark archlab's load generator against its peers, in one run on one machine.

Servers are pinned to one CPU and generators to the other; contenders alternate in every
repetition so that drift of the machine hits both alike; medians and ratios of medians are
printed. Traffic stays on 127.0.0.1. The nginx, wrk and `archlab-engine load` plumbing is
`bench/http_peers.py`'s.

1. Closed model, HTTP: `archlab-engine load` vs wrk (-t1), both driving nginx (1 worker).
   Target: >= 1.0x wrk requests/s per generator core.
2. Open model with raw records on (`--records`), at 0.75x wrk's median closed rate: the rate
   achieved. Target: >= 0.75x wrk's closed rate.
3. memcached: `archlab-engine load --protocol memcached` (closed, 1:10 ratio) against one
   memcached thread, archlab's rate alone.

Not yet: the memcslap side of 3 (memcslap, Debian package libmemcached-tools, was not
available where this was written, so its output could not be parsed reliably), and the added
latency against a server that records its own service time (issue 4's third target).

usage: .venv/bin/python bench/load_peers.py [--reps 5] [--duration 5] [--connections 64]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

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
                    raise RuntimeError("memcached did not start")
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


def main() -> int:
    a = parse_arguments(__doc__)
    if why := missing_prerequisite():
        print(f"bench: {why}", file=sys.stderr)
        return 1
    sc, cc, n, d = a.server_cpu, a.client_cpu, a.connections, a.duration
    print(f"servers on CPU {sc}, generators on CPU {cc}, {n} connections, {d} s per measurement, "
          f"{a.reps} alternating repetitions")

    with nginx(sc) as url:
        wrk_rates = []

        def wrk_run():
            r = wrk(url, cc, n, d)
            wrk_rates.append(r)
            return r

        compare("1. closed model: archlab-engine load vs wrk, both driving nginx",
                "archlab-load", lambda: archlab_load(url, cc, n, d), "wrk", wrk_run, a.reps, 1.0)
        closed = statistics.median(wrk_rates)
        rate = 0.75 * closed
        achieved = [archlab_open(url, cc, n, d, rate) for _ in range(a.reps)]
        ratio = statistics.median(achieved) / closed
        print(f"\n2. open model with raw records at {rate:,.0f}/s (0.75x wrk's {closed:,.0f}/s): achieved "
              f"{', '.join(f'{x:,.0f}' for x in achieved)} -> {ratio:.3f}x wrk "
              f"({'meets' if ratio >= 0.75 * 0.99 else 'MISSES'} the target >= 0.75)")

    if not Path(MEMCACHED).exists():
        print(f"\n3. memcached: skipped ({MEMCACHED} missing: apt-get install memcached)")
        return 0
    with memcached(sc) as target:
        rates = [archlab_memcached(target, cc, n, d) for _ in range(a.reps)]
        print(f"\n3. memcached: archlab-engine load {statistics.median(rates):,.0f} ops/s (median of "
              f"{', '.join(f'{x:,.0f}' for x in rates)}); the memcslap side is not written yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
