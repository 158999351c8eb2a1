"""A simulated thread-pool server to test and compare pool-size tuners on, built with
:mod:`archlab.sim`: ``clients`` closed-loop clients (no think time) send requests to a pool of m
threads; a request holds its thread (``sim.call`` on the pool station) while it is served by the
CPU (``cores`` servers, exponential service of mean ``cpu_s * (1 + thread_cost * (m - 1))``: the
per-thread contention term of :mod:`archlab.tuning.model_based`) and then waits ``wait_s`` (the
downstream, exponential). Each :meth:`PoolPlant.run` is one control interval: a fresh seeded
simulation at the given size, so the plant is deterministic for a seed and its noise is the
sampling error of one interval. :meth:`PoolPlant.change` swaps the program (its demands)
mid-run, as a change of the request mix would. Times are in model units."""

from __future__ import annotations

from dataclasses import dataclass

from archlab import sim


@dataclass
class PoolPlant:
    cpu_s: float
    wait_s: float
    cores: int = 1
    clients: int = 64
    thread_cost: float = 0.0
    interval: float = 2000.0
    warmup: float = 100.0
    seed: int = 1

    def __post_init__(self) -> None:
        self._runs = 0

    def change(self, *, cpu_s: float, wait_s: float) -> None:
        self.cpu_s, self.wait_s = cpu_s, wait_s

    def model(self, pool_size: int) -> sim.Model:
        m = sim.Model()
        pool = m.station("pool", servers=pool_size)
        cpu = m.station("cpu", servers=self.cores)
        downstream = m.station("downstream", servers=self.clients)
        service = self.cpu_s * (1 + self.thread_cost * (pool_size - 1))
        route = [sim.call(pool, [sim.serve(cpu, sim.Exponential(service)), sim.serve(downstream, sim.Exponential(self.wait_s))])]
        m.closed("clients", clients=self.clients, route=route)
        return m

    def run(self, pool_size: int) -> float:
        """Throughput (requests per time unit) of one control interval at ``pool_size``."""
        self._runs += 1
        run = sim.Simulation(horizon=self.warmup + self.interval, warmup=self.warmup, replications=1,
                             seed=self.seed * 1_000_003 + self._runs)
        return float(run.run(self.model(pool_size)).throughput.mean)
