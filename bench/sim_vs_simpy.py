"""Benchmark archlab.sim against SimPy written well, Ciw, and the thesis's printed SimPy program.

The model is seed 000 Table 8.1's closed system: N clients with no think time, one FIFO queue,
k servers with exponential service of mean 0.025, horizon 1000. Contenders, all in this one
process pinned to one CPU, timed the same way (``bench/harness.py``: one warm-up run each, then
``--reps`` alternating repetitions, wall time and CPU time of every run):

* ``archlab``: ``archlab.sim`` (one replication on one thread), model validation, the Rust run
  and the conversion of its results to Python included.
* ``simpy-well``: SimPy as a competent user writes it, one event per request: each client puts
  a (service time, done event) pair into a ``simpy.Store`` and waits for its event; each of the
  k server processes takes the next pair, holds for its service time and fires the event.
  Service times come from ``random.expovariate``. Run a second time, untimed, on archlab's own
  random stream (xoshiro256++ keyed as ``crates/sim`` keys a station's service stream, written
  out here in Python), its request count and mean response must be bit-identical to
  archlab.sim's: the check that the two programs simulate the same system the same way.
* ``ciw``: Ciw (``ciw`` on PyPI), the queueing-network simulation library: one node with k
  servers and routing back to itself with probability 1, N customers arriving at t = 0 and none
  after (Ciw models open networks; this is its way of holding N customers in a closed loop).
* ``simpy-printed``: seed 000 Fig. 8.2 exactly as printed (OCR errors of the scan fixed:
  ``out_plpe`` -> ``out_pipe``, ``yteld`` -> ``yield``, the stray duplicate ``get`` line and the
  line numbers removed), whose ``FilterStore`` rescans every waiting client on each response.
  Slow at large N (``--contenders`` leaves it out).

Every contender's throughput and mean response are checked against archlab's: equal within four
standard errors (with N >= k every server is always busy, so the departures of a run are a
Poisson count of mean 40 k T: relative standard error 1/sqrt(40 k T) per run, sqrt(2) times that
for the difference of two runs; the mean response is N / throughput by Little's law up to the
run's ends, so it gets the same tolerance). Printed per cell: per contender the median wall time
and CPU microseconds per request; archlab's speed-up over each peer as the median of per-pair
ratios with its bootstrap 95% interval, of wall time and of CPU time per request (which steal
time and a busy neighbour do not inflate). Target (issue 19): >= 100x SimPy written well at N = 500.
Results: ``bench/results/sim_vs_simpy.json``.

usage: .venv/bin/python bench/sim_vs_simpy.py [--concurrency 500] [--cores 1 4] [--reps 10]
       [--contenders archlab,simpy-well,ciw,simpy-printed] [--cpu 0]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

HORIZON = 1000.0
MEAN_SERVICE = 0.025
SEED = 42
CONTENDERS = ("archlab", "simpy-well", "ciw", "simpy-printed")
TARGET = 100.0

# Seed 000, Fig. 8.2 "Single server pseudo code", as printed (OCR fixed, see the docstring).
FIG_8_2 = """
import random
import simpy

SEED = 42
average_processing_time = 0.025

response_times =[]
queue_lengths = []
waiting_times = []

concurrency = {concurrency}
num_cores = {num_cores}

def client(env, out_pipe, in_pipe, i):
    global response_times
    while True:
        processing_time = random.expovariate(1/average_processing_time)
        arrival_time = env.now
        d = {{1: processing_time, 2: i, 3: arrival_time}}
        out_pipe.put(d)
        response = yield in_pipe.get(filter=lambda x: True if x[2] == i else False)
        response_time = env.now - arrival_time
        response_times.append(response_time)

def server(env, in_pipe, outpipe):
    global queue_lengths
    global waiting_times
    while True:
        request = yield in_pipe.get()
        processing_time = request[1]
        arrival_time = request[3]
        waiting_time = env.now - arrival_time
        waiting_times.append(waiting_time)
        queue_length = len(in_pipe.items)
        queue_lengths.append(queue_length)
        yield env.timeout(processing_time)
        outpipe.put(request)

random.seed(SEED)

environment = simpy.Environment()
in_pipe=simpy.Store(environment)
out_pipe=simpy.FilterStore(environment)

for i in range(concurrency):
    environment.process(client(environment, in_pipe, out_pipe, i))

for t in range(num_cores):
    environment.process(server(environment,in_pipe, out_pipe))

environment.run({horizon})

response_times=[x*1000 for x in response_times]
waiting_times=[x*1000 for x in waiting_times]
"""


# --- the contenders -----------------------------------------------------------------------------
# Each returns (requests completed, mean response) of one run; the harness times it.

def run_archlab(concurrency: int, cores: int) -> tuple[int, float]:
    from archlab import sim

    m = sim.Model()
    server = m.station("server", servers=cores)
    m.closed("clients", clients=concurrency, route=[sim.serve(server, sim.Exponential(MEAN_SERVICE))])
    result = sim.Simulation(horizon=HORIZON, replications=1, threads=1, seed=SEED).run(m)
    completed = round(result.response.throughput.mean * HORIZON)
    return completed, result.response.mean.mean


def run_simpy_well(concurrency: int, cores: int, draw=None) -> tuple[int, float]:
    """One event per request. ``draw()`` gives the next service time (default: random's)."""
    import simpy

    if draw is None:
        rng = random.Random(SEED)
        expovariate, rate = rng.expovariate, 1.0 / MEAN_SERVICE

        def draw():
            return expovariate(rate)

    env = simpy.Environment()
    queue = simpy.Store(env)
    put, get, timeout, event = queue.put, queue.get, env.timeout, env.event
    totals = [0, 0.0]  # completed, sum of responses, in order of completion

    def client():
        while True:
            done = event()
            start = env.now
            put((draw(), done))
            yield done
            totals[0] += 1
            totals[1] += env.now - start

    def server():
        while True:
            service, done = yield get()
            yield timeout(service)
            done.succeed()

    for _ in range(concurrency):
        env.process(client())
    for _ in range(cores):
        env.process(server())
    env.run(HORIZON)
    return totals[0], totals[1] / totals[0]


def run_ciw(concurrency: int, cores: int) -> tuple[int, float]:
    import ciw

    class FirstN(ciw.dists.Distribution):
        """N arrivals at t = 0, then none: the closed population."""

        def __init__(self, n: int):
            super().__init__()
            self.left = n

        def sample(self, t=None, ind=None):
            self.left -= 1
            return 0.0 if self.left >= 0 else float("inf")

    network = ciw.create_network(arrival_distributions=[FirstN(concurrency)],
                                 service_distributions=[ciw.dists.Exponential(rate=1.0 / MEAN_SERVICE)],
                                 number_of_servers=[cores], routing=[[1.0]])
    ciw.seed(SEED)
    q = ciw.Simulation(network)
    q.simulate_until_max_time(HORIZON)
    responses = [r.exit_date - r.arrival_date for r in q.get_all_records() if r.exit_date <= HORIZON]
    return len(responses), statistics.fmean(responses)


def run_simpy_printed(concurrency: int, cores: int) -> tuple[int, float]:
    namespace: dict = {}
    code = compile(FIG_8_2.format(concurrency=concurrency, num_cores=cores, horizon=int(HORIZON)), "fig_8_2", "exec")
    exec(code, namespace)
    rt = namespace["response_times"]
    return len(rt), statistics.fmean(rt) / 1000.0


RUNNERS = {"archlab": run_archlab, "simpy-well": run_simpy_well, "ciw": run_ciw, "simpy-printed": run_simpy_printed}


# --- archlab's random stream, in Python, for the bit-identity check --------------------------------

MASK = (1 << 64) - 1


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def archlab_service_stream(seed: int, replication: int = 0, station: int = 0):
    """The service times ``crates/sim`` draws at ``station``: xoshiro256++ keyed by (seed,
    [replication, Purpose::Service = 3, station, 0]) through SplitMix64 (``archlab-prng``'s
    ``keyed``), exponential by inversion of a uniform on (0, 1] (``Dist::sample``)."""
    h = seed
    for word in (replication, 3, station, 0):
        h, out = _splitmix64(h)
        h = out ^ word
    s = []
    for _ in range(4):
        h, out = _splitmix64(h)
        s.append(out)

    def rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & MASK

    def draw() -> float:
        result = (rotl((s[0] + s[3]) & MASK, 23) + s[0]) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        u = ((result >> 11) + 1) * (1.0 / (1 << 53))
        return -MEAN_SERVICE * math.log(u)

    return draw


# --- one cell -------------------------------------------------------------------------------------

def cell(concurrency: int, cores: int, names: list[str], reps: int) -> dict:
    outputs: dict[str, tuple[int, float]] = {}

    def contender(name: str) -> harness.Contender:
        def once() -> harness.Sample:
            def work() -> float:
                outputs[name] = RUNNERS[name](concurrency, cores)
                return outputs[name][0]

            return harness.timed(work)

        return harness.Contender(name, once)

    print(f"N = {concurrency}, k = {cores}", file=sys.stderr)
    result = harness.alternate([contender(n) for n in names], reps)
    rows = []
    reference = outputs.get("archlab")
    # Four standard errors of the difference of two runs' throughputs (see the docstring).
    tolerance = 4 * math.sqrt(2.0 / (HORIZON / MEAN_SERVICE * min(cores, concurrency)))
    for name in names:
        completed, mean = outputs[name]
        row = {"contender": name, "concurrency": concurrency, "cores": cores,
               "median_wall_s": statistics.median(result.values(name)),
               "cpu_us_per_request": result.cpu_per_unit_us(name), "requests": completed, "mean_response": mean}
        if reference is not None and name != "archlab":
            row["speedup"] = result.ratio("archlab", name, higher_is_better=False)
            row["cpu_speedup"] = result.cpu_ratio("archlab", name)
            row["throughput_rel_diff"] = completed / reference[0] - 1.0
            row["mean_rel_diff"] = mean / reference[1] - 1.0
            row["statistically_equal"] = abs(row["throughput_rel_diff"]) <= tolerance and \
                abs(row["mean_rel_diff"]) <= tolerance
        rows.append(row)
    if reference is not None and "simpy-well" in names:
        same = run_simpy_well(concurrency, cores, draw=archlab_service_stream(SEED))
        identical = same == reference
        for row in rows:
            if row["contender"] == "simpy-well":
                row["bit_identical_on_archlab_stream"] = identical
                row["on_archlab_stream"] = {"requests": same[0], "mean_response": same[1]}
    return {"rows": rows, "raw": harness.raw_samples(result), "tolerance": tolerance}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[500])
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--reps", type=int, default=10, help="timed repetitions per contender (after one warm-up)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated subset of {','.join(CONTENDERS)} (archlab always runs)")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU this process is pinned to")
    args = parser.parse_args()
    names = ["archlab"] + [n for n in dict.fromkeys(args.contenders.split(",")) if n and n != "archlab"]
    if unknown := [n for n in names if n not in CONTENDERS]:
        print(f"bench: --contenders takes {','.join(CONTENDERS)}; got {','.join(unknown)}", file=sys.stderr)
        return 2
    if args.reps < 1 or any(n < 1 for n in args.concurrency + args.cores):
        print("bench: --reps, --concurrency and --cores take integers >= 1", file=sys.stderr)
        return 2
    harness.pin_self(args.cpu)
    facts = harness.machine_facts({"simpy": harness.package_version("simpy"), "ciw": harness.package_version("ciw"),
                                   "archlab": harness.package_version("archlab")})
    print(f"pinned to CPU {args.cpu}; {args.reps} alternating repetitions after one warm-up; "
          f"SimPy {facts['tools']['simpy']}, Ciw {facts['tools']['ciw']}")
    table, raw = [], {}
    for n in args.concurrency:
        for k in args.cores:
            done = cell(n, k, names, args.reps)
            table += done["rows"]
            raw[f"N={n},k={k}"] = done["raw"]
            print_cell(n, k, done)
    path = harness.write_results("sim_vs_simpy", table, facts, {"reps": args.reps, "horizon": HORIZON,
                                                                 "cpu": args.cpu, "contenders": names}, raw)
    print(f"\nresults: {path}")
    return 0


def print_cell(n: int, k: int, done: dict) -> None:
    print(f"\nN = {n}, k = {k} (equal within +-{done['tolerance']:.1%})")
    print(f"  {'contender':<14} {'wall s':>9} {'CPU us/req':>11} {'requests':>9} {'R mean':>8}  archlab speed-up "
          "[95% CI]: wall time; CPU time per request")
    for row in done["rows"]:
        line = (f"  {row['contender']:<14} {row['median_wall_s']:>9.4f} {row['cpu_us_per_request']:>11.2f}"
                f" {row['requests']:>9,} {row['mean_response']:>8.3f}")
        if "speedup" in row:
            line += f"  {row['speedup']}; {row['cpu_speedup']}"
            if row["contender"] == "simpy-well":
                line += f"  (wall: {harness.verdict(row['speedup'], TARGET)}; CPU: {harness.verdict(row['cpu_speedup'], TARGET)})"
            line += "" if row["statistically_equal"] else "  OUTPUTS DIFFER"
        if "bit_identical_on_archlab_stream" in row:
            line += "  bit-identical on archlab's stream" if row["bit_identical_on_archlab_stream"] else \
                f"  NOT bit-identical on archlab's stream: {row['on_archlab_stream']}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
