"""Benchmark archlab.sim against SimPy on seed 000's Table 8.1 model, in one run on one machine.

The SimPy contender is seed 000 Fig. 8.2 exactly as printed (the OCR errors of the scan fixed:
`out_plpe` -> `out_pipe`, `yteld` -> `yield`, the stray duplicate `get` line and the line
numbers removed), run once per cell with its own constants replaced: concurrency N, num_cores k,
horizon 1000, `random.seed(42)`. archlab.sim runs the same model (N closed clients, no think
time, one FIFO queue, k exponential servers of mean 0.025) as one replication on one thread;
its time is the best of `--reps` runs, model validation and result conversion included.

Printed per cell: wall times, the ratio SimPy / archlab, events per second of each (SimPy: the
events its environment scheduled, read from its event counter after the run; archlab: the events
its engine popped), and both programs' throughput and mean response, so speed is never quoted
for a model that computes something else. A benchmark, not a test: nothing is asserted.
Target (issue 7): archlab >= 100x faster at concurrency 500.

usage: .venv/bin/python bench/sim_vs_simpy.py [--concurrency 100 200 500] [--cores 1 2 4] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from archlab import sim

HORIZON = 1000

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


def run_simpy(concurrency: int, cores: int) -> dict:
    namespace: dict = {}
    code = compile(FIG_8_2.format(concurrency=concurrency, num_cores=cores, horizon=HORIZON), "fig_8_2", "exec")
    start = time.perf_counter()
    exec(code, namespace)
    wall = time.perf_counter() - start
    rt = namespace["response_times"]
    events = next(namespace["environment"]._eid)  # SimPy numbers every scheduled event
    return {"wall": wall, "events": events, "throughput": len(rt) / HORIZON, "mean_ms": statistics.fmean(rt)}


def run_archlab(concurrency: int, cores: int, reps: int) -> dict:
    m = sim.Model()
    server = m.station("server", servers=cores)
    m.closed("clients", clients=concurrency, route=[sim.serve(server, sim.Exponential(0.025))])
    run = sim.Simulation(horizon=HORIZON, replications=1, threads=1, seed=42)
    walls = []
    for _ in range(reps):
        start = time.perf_counter()
        result = run.run(m)
        walls.append(time.perf_counter() - start)
    return {"wall": min(walls), "events": result.events, "throughput": result.response.throughput.mean,
            "mean_ms": result.response.mean.mean * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[100, 200, 500])
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--reps", type=int, default=5, help="archlab runs per cell (best is kept)")
    args = parser.parse_args()
    print(f"{'N':>4} {'k':>2} | {'SimPy s':>8} {'archlab s':>9} {'ratio':>7} | {'SimPy ev/s':>10} {'archlab ev/s':>12} |"
          f" {'X SimPy':>8} {'X ours':>8} {'R ms SimPy':>10} {'R ms ours':>9}")
    for n in args.concurrency:
        for k in args.cores:
            s, a = run_simpy(n, k), run_archlab(n, k, args.reps)
            print(f"{n:>4} {k:>2} | {s['wall']:>8.2f} {a['wall']:>9.4f} {s['wall'] / a['wall']:>6.0f}x |"
                  f" {s['events'] / s['wall']:>10.3g} {a['events'] / a['wall']:>12.3g} |"
                  f" {s['throughput']:>8.2f} {a['throughput']:>8.2f} {s['mean_ms']:>10.1f} {a['mean_ms']:>9.1f}", flush=True)


if __name__ == "__main__":
    main()
