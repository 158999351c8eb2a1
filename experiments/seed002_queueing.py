"""Seed 002 §7 from a stored run of middleware topologies swept over clients (e.g.
`seed002-writes.toml`, as the seed used its §4): for each configuration (system and workload),
the whole system as M/M/1 and as M/M/m (m = every worker thread; mu = the configuration's
largest measured throughput, lambda = each level's) and the network of queues per middleware
(net thread, W workers, the clients' and network's delay; demands measured at the lightest
level, exact MVA), each predicted value beside the measured one, as Markdown tables (the shape
of seed 002 Tables 31-33).

usage: .venv/bin/python experiments/seed002_queueing.py RUN_ID [--store runs]"""

from __future__ import annotations

import argparse
import sys

from archlab.cli.stores import known_run, open_store
from archlab.errors import ArchlabError
from archlab.models.middleware_run import fmt, network_comparison, points_from_run, station_comparison


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--store", default="runs")
    args = parser.parse_args(argv)
    try:
        store = open_store(args.store)
        view = store.load_run(known_run(store, args.run_id))
        points = points_from_run(view.manifest.spec, view.rows, store.run_dir(args.run_id))
        configs = dict.fromkeys((p.system, p.workload, p.middlewares, p.workers) for p in points)
        for system, workload, middlewares, workers in configs:
            mine = [p for p in points if (p.system, p.workload) == (system, workload)]
            m = middlewares * workers
            mu, rows = station_comparison(mine, m)
            print(f"\n#### {system} {workload}: {middlewares} x {workers} workers; M/M/1 mu = {mu:,.0f}/s, M/M/{m} mu = {mu / m:,.1f}/s per worker\n")
            print("| clients | X measured | rho | response M/M/1 | M/M/m | measured (middleware) | queue wait M/M/1 | M/M/m | measured "
                  "| queue length M/M/1 | M/M/m | measured |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
            for r in rows:
                lv = r.level
                print(f"| {lv.concurrency} | {fmt(lv.throughput_rps, 0)} | {r.rho:.3f} | {fmt(r.mm1_response_ms, 3)} | {fmt(r.mmm_response_ms, 3)} "
                      f"| {fmt(lv.mw_response_ms, 3)} | {fmt(r.mm1_wait_ms, 3)} | {fmt(r.mmm_wait_ms, 3)} | {fmt(lv.mw_queue_wait_ms, 3)} "
                      f"| {fmt(r.mm1_queue)} | {fmt(r.mmm_queue)} | {fmt(lv.mw_queue_length)} |")
            demands, net = network_comparison(mine, middlewares, workers)
            print(f"\nnetwork of queues per middleware, demands at {demands.concurrency} clients: net thread {demands.net_thread_ms:.3f} ms, "
                  f"a worker {demands.worker_ms:.3f} ms (x {workers}), clients and network {demands.delay_ms:.3f} ms (delay)\n")
            print("| clients | X predicted | measured | response predicted | measured (clients) | net thread predicted | measured "
                  "| workers predicted | measured (wait + held) | U net thread | U workers |\n|---|---|---|---|---|---|---|---|---|---|---|")
            for q in net:
                lv = q.level
                print(f"| {lv.concurrency} | {fmt(q.throughput_rps, 0)} | {fmt(lv.throughput_rps, 0)} | {fmt(q.client_response_ms, 3)} "
                      f"| {fmt(lv.client_response_ms, 3)} | {fmt(q.net_thread_ms, 3)} | {fmt(lv.mw_before_queue_ms, 3)} | {fmt(q.workers_ms, 3)} "
                      f"| {fmt(lv.mw_queue_wait_ms + lv.mw_worker_ms, 3)} | {q.net_thread_utilisation:.2f} | {q.worker_utilisation:.2f} |")
    except ArchlabError as e:
        print(f"seed002_queueing: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
