"""Where the lab's distributed parts run: a Dask distributed scheduler the user started
(``--cluster tcp://HOST:PORT``) or a ``LocalCluster`` of N worker processes on this host over
TCP on loopback (``--cluster local:N``), opened as a :class:`Cluster` whose ``close`` stops what
it started (never an external scheduler or its workers). Load workers are the workers that
offer the Dask resource ``load`` (``dask worker ... --resources load=1``; every worker of a
local cluster offers it): each runs at most one load shard at a time, so shards never share a
worker's CPUs. This module and everything it imports is loaded only when a cluster is asked
for: a local run never imports Dask."""

from __future__ import annotations

import inspect
import logging
import socket
from dataclasses import dataclass

import dask
from distributed import Client, LocalCluster

from archlab.errors import ArchlabError
from archlab.spec.cluster import ClusterAddress

#: The Dask worker resource that marks a load host.
LOAD_RESOURCE = "load"


class ClusterError(ArchlabError):
    """The cluster cannot do what the run needs (unreachable, too few load workers, clocks)."""


@dataclass(frozen=True)
class WorkerInfo:
    address: str
    host: str
    name: str
    load_slots: float


class Cluster:
    """An open connection to a cluster: its Dask ``client`` and, for ``local:N``, the
    ``LocalCluster`` this process started."""

    def __init__(self, address: ClusterAddress, client: Client, local: LocalCluster | None):
        self.address = address
        self.client = client
        self._local = local

    def workers(self) -> list[WorkerInfo]:
        info = self.client.scheduler_info(n_workers=-1) if _accepts_n_workers(self.client) else self.client.scheduler_info()
        out = []
        for addr, w in sorted(info.get("workers", {}).items()):
            out.append(WorkerInfo(addr, str(w.get("host", "")), str(w.get("name", addr)), float((w.get("resources") or {}).get(LOAD_RESOURCE, 0))))
        return out

    def load_workers(self, hosts: tuple[str, ...] | None = None) -> list[WorkerInfo]:
        """Workers tagged as load hosts (resource ``load`` >= 1), sorted by address; with
        ``hosts``, only those of these names (the spec's ``cluster.load_hosts``), every one of
        which must be a load worker of the cluster."""
        workers = [w for w in self.workers() if w.load_slots >= 1]
        if hosts is None:
            return workers
        names = {w.name for w in workers}
        missing = [h for h in hosts if h not in names]
        if missing:
            raise ClusterError(
                f"cluster.load_hosts: {missing} not among the load workers of {self.address} "
                f"(workers started with `--resources {LOAD_RESOURCE}=1`: {sorted(names) or 'none'})"
            )
        return [w for w in workers if w.name in hosts]

    def require_load_workers(self, shards: int, hosts: tuple[str, ...] | None = None) -> list[WorkerInfo]:
        """The load workers (of ``hosts`` if given), refusing a run that places more shards than there are."""
        workers = self.load_workers(hosts)
        if shards > len(workers):
            among = " named in cluster.load_hosts" if hosts is not None else ""
            raise ClusterError(
                f"--shards {shards}: the cluster {self.address} has {len(workers)} load worker(s){among} (workers started with "
                f"`--resources {LOAD_RESOURCE}=1`); start more or ask for at most {len(workers)} shard(s)"
            )
        return workers

    def facts(self) -> dict:
        """Where things run, for the run's manifest."""
        return {
            "scheduler": str(self.address) if self.address.kind == "scheduler" else self.client.scheduler.address,
            "kind": self.address.kind,
            "client_host": socket.gethostname(),
            "workers": [{"address": w.address, "host": w.host, "name": w.name, "load_slots": w.load_slots} for w in self.workers()],
        }

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            if self._local is not None:
                self._local.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _accepts_n_workers(client: Client) -> bool:
    """Newer clients list only the first few workers unless asked for all (``n_workers=-1``)."""
    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def open_cluster(address: ClusterAddress | str, timeout_s: float = 5.0) -> Cluster:
    """Connect to (or start) the cluster ``address``; an unreachable scheduler is a
    :class:`ClusterError` naming it, raised within ``timeout_s``."""
    if isinstance(address, str):
        address = ClusterAddress.parse(address)
    # A shard must never be run twice: a task whose worker dies fails at once (KilledWorker)
    # instead of being retried on another worker after the cell's agreed start.
    config = {"distributed.scheduler.allowed-failures": 0}
    if address.kind == "local":
        with dask.config.set(config):
            local = LocalCluster(
                n_workers=address.workers, threads_per_worker=1, processes=True, protocol="tcp", host="127.0.0.1",
                # Its HTTP endpoints on a free loopback port, never a fixed one (8787 may be taken).
                dashboard_address="127.0.0.1:0", resources={LOAD_RESOURCE: 1},
                # The lab says what went wrong in one line of its own (a lost worker is a
                # ClusterError or a ClusterFault); the scheduler's log lines would bury it.
                silence_logs=logging.CRITICAL,
            )  # fmt: skip
        try:
            client = Client(local, timeout=timeout_s)
        except BaseException:
            local.close()
            raise
        return Cluster(address, client, local)
    try:
        client = Client(address.scheduler, timeout=timeout_s)
    except (OSError, TimeoutError) as e:
        raise ClusterError(
            f"--cluster {address}: no Dask scheduler answered within {timeout_s:g} s ({type(e).__name__}: {e}); "
            "start one with `dask scheduler`, or try `--cluster local:2`"
        ) from None
    return Cluster(address, client, None)
