"""Benchmark archlab.sim against SimPy written well, Ciw, and the thesis's printed SimPy program.

The model is seed 000 Table 8.1's closed system: N clients with no think time, one FIFO queue,
k servers with exponential service of mean 0.025, horizon 1000. Every contender does the same work
from the same raw input: it reads one TOML model file (archlab's model-file format, written once
per cell; reading and parsing it is timed), simulates to the horizon and computes the same
statistics of the response time (requests completed, throughput, mean, p50, p90, p99, p99.9,
max). All run in this one process pinned to one CPU, timed the same way (``bench/harness.py``:
one warm-up run each, then ``--reps`` alternating repetitions, wall time and CPU time of every
run):

* ``archlab``: ``archlab.sim.spec.load_spec`` then ``Simulation.run`` (one replication on one
  thread): the file read, the model's validation, the Rust run and the conversion of its results
  to Python objects all included; it also computes station utilisation, queue lengths, Little's
  check and an encoded histogram, which only costs it.
* ``simpy-well``: SimPy as a competent user writes it, one event per request: each client puts
  a (service time, done event) pair into a ``simpy.Store`` and waits for its event; each of the
  k server processes takes the next pair, holds for its service time and fires the event.
  Service times come from ``random.expovariate``; response times go to a list and NumPy computes
  the quantiles at the end. Run a second time, untimed, on archlab's own random stream
  (xoshiro256++ keyed as ``crates/sim`` keys a station's service stream, written out here in
  Python), its request count, mean and maximum must be bit-identical to archlab.sim's and its
  quantiles within one HDR bucket (archlab's are HDR quantiles): the check that the two programs
  simulate the same system the same way.
* ``ciw``: Ciw (``ciw`` on PyPI), the queueing-network simulation library: one node with k
  servers and routing back to itself with probability 1, N customers arriving at t = 0 and none
  after (Ciw models open networks; this is its way of holding N customers in a closed loop).
* ``simpy-printed``: seed 000 Fig. 8.2 exactly as printed (OCR errors of the scan fixed:
  ``out_plpe`` -> ``out_pipe``, ``yteld`` -> ``yield``, the stray duplicate ``get`` line and the
  line numbers removed), whose ``FilterStore`` rescans every waiting client on each response.
  Slow at large N (``--contenders`` leaves it out). Its program is the printed one, so it takes
  only N and k from the model file and its statistics are the printed ones.

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
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import asdict, dataclass
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


# --- the model file ---------------------------------------------------------------------------------

MODEL_FILE = """\
# Seed 000 Table 8.1's closed system, one cell: what every contender reads.
[simulation]
horizon = {horizon!r}
warmup = 0.0
replications = 1
threads = 1
seed = {seed}

[[stations]]
name = "server"
servers = {cores}
discipline = "fcfs"

[[sources]]
kind = "closed"
name = "clients"
clients = {concurrency}
think = {{ dist = "deterministic", value = 0.0 }}
route = [{{ step = "serve", station = "server", service = {{ dist = "exponential", mean = {mean!r} }} }}]
"""


def write_model(directory: Path, concurrency: int, cores: int) -> Path:
    path = directory / f"table81-n{concurrency}-k{cores}.toml"
    path.write_text(MODEL_FILE.format(horizon=HORIZON, seed=SEED, cores=cores, concurrency=concurrency,
                                      mean=MEAN_SERVICE))
    return path


@dataclass(frozen=True)
class ClosedModel:
    """What the hand-written contenders take from the model file: they implement only this shape
    (one FCFS station, one closed source without think time, exponential service) and refuse
    any other."""

    concurrency: int
    cores: int
    mean_service: float
    horizon: float
    seed: int

    @classmethod
    def read(cls, path: Path) -> ClosedModel:
        doc = tomllib.loads(path.read_text())
        (station,), (source,) = doc["stations"], doc["sources"]
        (step,) = source["route"]
        if (station.get("discipline", "fcfs"), source["kind"], source["think"], step["step"], step["service"]["dist"]) \
                != ("fcfs", "closed", {"dist": "deterministic", "value": 0.0}, "serve", "exponential"):
            raise ValueError(f"{path}: expected one FCFS station, one closed source without think time and "
                             "exponential service")
        sim = doc["simulation"]
        return cls(source["clients"], station["servers"], step["service"]["mean"], sim["horizon"], sim["seed"])


# --- the statistics every contender computes --------------------------------------------------------

STATISTICS = ("requests", "mean", "p50", "p90", "p99", "p999", "max")


@dataclass(frozen=True)
class Stats:
    """Response times of one run: requests completed in [0, horizon], mean, quantiles, max."""

    requests: int
    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    max: float


def stats_of(responses: list[float], total: float) -> Stats:
    """The statistics from the response times in order of completion; ``total`` is their sum
    accumulated in that order (as archlab's tally does, so that the means can be bit-identical)."""
    import numpy as np

    p50, p90, p99, p999 = np.quantile(np.asarray(responses), [0.5, 0.9, 0.99, 0.999])
    return Stats(len(responses), total / len(responses), float(p50), float(p90), float(p99), float(p999),
                 max(responses))


# --- the contenders -----------------------------------------------------------------------------
# Each reads the model file and returns the Stats of one run; the harness times it.

def run_archlab(path: Path) -> Stats:
    from archlab.sim.spec import load_spec

    spec = load_spec(path)
    t = spec.simulation.run(spec.model).replications[0].total
    return Stats(t.completed, t.mean, t.p50, t.p90, t.p99, t.p999, t.max)


def run_simpy_well(path: Path, draw=None) -> Stats:
    """One event per request. ``draw()`` gives the next service time (default: random's)."""
    import simpy

    m = ClosedModel.read(path)
    if draw is None:
        rng = random.Random(m.seed)
        expovariate, rate = rng.expovariate, 1.0 / m.mean_service

        def draw():
            return expovariate(rate)

    env = simpy.Environment()
    queue = simpy.Store(env)
    put, get, timeout, event = queue.put, queue.get, env.timeout, env.event
    responses: list[float] = []
    record = responses.append
    total = [0.0]  # sum of responses, in order of completion

    def client():
        while True:
            done = event()
            start = env.now
            put((draw(), done))
            yield done
            r = env.now - start
            record(r)
            total[0] += r

    def server():
        while True:
            service, done = yield get()
            yield timeout(service)
            done.succeed()

    for _ in range(m.concurrency):
        env.process(client())
    for _ in range(m.cores):
        env.process(server())
    env.run(m.horizon)
    return stats_of(responses, total[0])


def run_ciw(path: Path) -> Stats:
    import ciw

    m = ClosedModel.read(path)

    class FirstN(ciw.dists.Distribution):
        """N arrivals at t = 0, then none: the closed population."""

        def __init__(self, n: int):
            super().__init__()
            self.left = n

        def sample(self, t=None, ind=None):
            self.left -= 1
            return 0.0 if self.left >= 0 else float("inf")

    network = ciw.create_network(arrival_distributions=[FirstN(m.concurrency)],
                                 service_distributions=[ciw.dists.Exponential(rate=1.0 / m.mean_service)],
                                 number_of_servers=[m.cores], routing=[[1.0]])
    ciw.seed(m.seed)
    q = ciw.Simulation(network)
    q.simulate_until_max_time(m.horizon)
    responses = [r.exit_date - r.arrival_date for r in q.get_all_records() if r.exit_date <= m.horizon]
    return stats_of(responses, sum(responses))


def run_simpy_printed(path: Path) -> Stats:
    m = ClosedModel.read(path)
    namespace: dict = {}
    code = compile(FIG_8_2.format(concurrency=m.concurrency, num_cores=m.cores, horizon=int(m.horizon)), "fig_8_2",
                   "exec")
    exec(code, namespace)
    rt = [x / 1000.0 for x in namespace["response_times"]]
    return stats_of(rt, sum(rt))


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

def cell(concurrency: int, cores: int, names: list[str], reps: int, directory: Path) -> dict:
    model = write_model(directory, concurrency, cores)
    outputs: dict[str, Stats] = {}

    def contender(name: str) -> harness.Contender:
        def once() -> harness.Sample:
            def work() -> float:
                outputs[name] = RUNNERS[name](model)
                return outputs[name].requests

            return harness.timed(work)

        return harness.Contender(name, once)

    print(f"N = {concurrency}, k = {cores}", file=sys.stderr)
    result = harness.alternate([contender(n) for n in names], reps)
    rows = []
    reference = outputs.get("archlab")
    # Four standard errors of the difference of two runs' throughputs (see the docstring).
    tolerance = 4 * math.sqrt(2.0 / (HORIZON / MEAN_SERVICE * min(cores, concurrency)))
    for name in names:
        out = outputs[name]
        row = {"contender": name, "concurrency": concurrency, "cores": cores,
               "median_wall_s": statistics.median(result.values(name)),
               "cpu_us_per_request": result.cpu_per_unit_us(name), **asdict(out)}
        if reference is not None and name != "archlab":
            row["speedup"] = result.ratio("archlab", name, higher_is_better=False)
            row["cpu_speedup"] = result.cpu_ratio("archlab", name)
            row["throughput_rel_diff"] = out.requests / reference.requests - 1.0
            row["mean_rel_diff"] = out.mean / reference.mean - 1.0
            row["statistically_equal"] = abs(row["throughput_rel_diff"]) <= tolerance and \
                abs(row["mean_rel_diff"]) <= tolerance
        rows.append(row)
    if reference is not None and "simpy-well" in names:
        same = run_simpy_well(model, draw=archlab_service_stream(SEED))
        # archlab's quantiles are HDR ones (3 significant digits: buckets of relative width
        # <= 2^-10, the bucket's middle reported); NumPy's interpolate between order statistics,
        # whose gap in these runs is far below that (about 1/(n f(x)) ~ 0.03 % at p99.9 for
        # n = 40,000). Count, mean and maximum are exact on both sides.
        quantiles_off = max(abs(getattr(same, q) / getattr(reference, q) - 1.0) for q in ("p50", "p90", "p99", "p999"))
        identical = (same.requests, same.mean, same.max) == (reference.requests, reference.mean, reference.max)
        for row in rows:
            if row["contender"] == "simpy-well":
                row["same_on_archlab_stream"] = identical and quantiles_off <= 2.0 ** -10
                row["on_archlab_stream"] = {**asdict(same), "quantiles_max_rel_diff": quantiles_off}
    return {"rows": rows, "raw": harness.raw_samples(result), "tolerance": tolerance}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=harness.count(), nargs="+", default=[500])
    parser.add_argument("--cores", type=harness.count(), nargs="+", default=[1, 4])
    parser.add_argument("--reps", type=harness.count(), default=10, help="timed repetitions per contender (after one warm-up)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated subset of {','.join(CONTENDERS)} (archlab always runs)")
    parser.add_argument("--cpu", type=harness.count(0), default=0, help="the CPU this process is pinned to")
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
    with tempfile.TemporaryDirectory(prefix="sim_vs_simpy-") as directory:
        for n in args.concurrency:
            for k in args.cores:
                done = cell(n, k, names, args.reps, Path(directory))
                table += done["rows"]
                raw[f"N={n},k={k}"] = done["raw"]
                print_cell(n, k, done)
    path = harness.write_results("sim_vs_simpy", table, facts, {"reps": args.reps, "horizon": HORIZON,
                                                                 "cpu": args.cpu, "contenders": names,
                                                                 "revision": revision()}, raw)
    print(f"\nresults: {path}")
    return 0


def revision() -> str:
    """The measured code's git revision ("+dirty" with uncommitted changes), or "unknown"."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(Path(__file__).parent), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short=12", "HEAD")
    return (head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")) or "unknown"


def print_cell(n: int, k: int, done: dict) -> None:
    print(f"\nN = {n}, k = {k} (equal within +-{done['tolerance']:.1%})")
    print(f"  {'contender':<14} {'wall s':>9} {'CPU us/req':>11} {'requests':>9} {'R mean':>8} {'R p99':>8}  archlab speed-up "
          "[95% CI]: wall time; CPU time per request")
    for row in done["rows"]:
        line = (f"  {row['contender']:<14} {row['median_wall_s']:>9.4f} {row['cpu_us_per_request']:>11.3f}"
                f" {row['requests']:>9,} {row['mean']:>8.3f} {row['p99']:>8.3f}")
        if "speedup" in row:
            line += f"  {row['speedup']}; {row['cpu_speedup']}"
            if row["contender"] == "simpy-well":
                line += f"  (wall: {harness.verdict(row['speedup'], TARGET)}; CPU: {harness.verdict(row['cpu_speedup'], TARGET)})"
            line += "" if row["statistically_equal"] else "  OUTPUTS DIFFER"
        if "same_on_archlab_stream" in row:
            line += "  same on archlab's stream" if row["same_on_archlab_stream"] else \
                f"  NOT the same on archlab's stream: {row['on_archlab_stream']}"
        print(line)


if __name__ == "__main__":
    harness.run_main(main)
