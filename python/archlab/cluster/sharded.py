"""A cell's load run as shards on the cluster's load workers: the client splits the cell's
``archlab-engine load`` command (:mod:`archlab.lab.load_shards`), measures every load worker's
clock offset, submits one task per shard (each needs the ``load`` resource, so no two shards
share a worker), waits until every shard reports ready on its worker, publishes a start instant
a little ahead (``lead_s``, the hop from client to workers), waits for all of them within the cell's time limit, measures the
offsets again, and writes into the repetition's directory each shard's files
(``shards/shard-K/``), the exactly merged summary and interval log (:mod:`archlab.lab.load_merge`,
read by the runner like a local run's) and ``shards.json``: per shard its worker and host,
users or rate, seed, generator-bound flag, start skew and clock offsets.

A shard whose generator fails (non-zero exit, no summary) fails the repetition like a local
generator would. A fault of the cluster itself (a worker lost mid-cell, a shard moved to another
worker, clocks too far apart) raises :class:`ClusterFault`, which stops the run with that pair
unrecorded, so ``archlab run --resume`` completes it."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributed import Queue, Variable

from archlab.cluster.clock import DEFAULT_MAX_OFFSET_S, ClockOffset, check_offsets, measure_offsets
from archlab.cluster.connect import LOAD_RESOURCE, Cluster, ClusterError
from archlab.cluster.loadshard import ShardFailed, ShardOutcome, prepare_worker, run_shard
from archlab.lab.load_merge import merge_shards
from archlab.lab.load_shards import split_load, split_params
from archlab.errors import ArchlabError, ProcessFailed, ResumableFault


class ClusterFault(ResumableFault):
    """The cluster lost a shard (worker died, shard moved, clocks apart): the pair stays pending."""


@dataclass
class ShardedLoad:
    """The runner's load executor for a cluster (see ``archlab.lab.runner.LoadExecutor``)."""

    cluster: Cluster
    shards: int
    #: Between publishing the start instant and the instant: the hop from client to workers.
    lead_s: float = 0.1
    max_offset_s: float = DEFAULT_MAX_OFFSET_S
    #: Only these load workers (Dask worker names) run shards; None: every load worker.
    load_hosts: tuple[str, ...] | None = None
    #: The worker that runs server cells' servers (``archlab.cluster.remote.RemoteHost``); None: this host.
    server_host: object | None = None
    #: How the cluster was chosen (flag or spec, :class:`archlab.spec.cluster.ClusterChoice`), for the manifest.
    chosen: dict | None = None
    #: Start skews (seconds between the first and the last shard's engine start) of the cells run.
    skews_s: list[float] = field(default_factory=list)

    _warm: set[str] = field(default_factory=set)
    #: The workers running ``[[systems]]`` entries (``worker = "NAME"``), by name, opened at first use.
    _system_hosts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cluster.require_load_workers(self.shards, self.load_hosts)

    def check_workers(self, names: dict[str, str]) -> None:
        """Refuse any of ``names`` (field -> worker name) the cluster has no worker of."""
        known = sorted(w.name for w in self.cluster.workers())
        for field_, name in names.items():
            if name not in known:
                raise ClusterError(f"{field_}: no worker named {name!r} in the cluster {self.cluster.address} (its workers: "
                                   f"{known or 'none'}; name them with `dask worker --name NAME`)")

    def system_host(self, name: str) -> Any:
        """The worker ``name`` as a place to run ``[[systems]]`` entries
        (:class:`archlab.cluster.remote.RemoteHost`), opened at first use, closed by :meth:`close`."""
        if name not in self._system_hosts:
            from archlab.cluster.remote import RemoteHost  # it builds on this module

            self._system_hosts[name] = RemoteHost(self.cluster, name, role="system host")
        return self._system_hosts[name]

    def close(self) -> None:
        """Stop every process this run started on the workers of its systems."""
        while self._system_hosts:
            self._system_hosts.popitem()[1].close()

    def __enter__(self) -> "ShardedLoad":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> dict:
        """The cluster, its workers and their clock offsets now, the shards per cell, the load
        hosts they may run on, and whether the flags or the spec chose them."""
        facts = self.cluster.facts()
        load = [w.address for w in self.cluster.load_workers(self.load_hosts)]
        offsets = measure_offsets(self.cluster.client, load)
        chosen = {"chosen": self.chosen} if self.chosen is not None else {}
        if self.server_host is not None:
            chosen["server_host"] = self.server_host.describe()  # type: ignore[attr-defined]
        return {**facts, "shards": self.shards, "load_hosts": list(self.load_hosts) if self.load_hosts is not None else None,
                "clock_offsets": [offsets[w].to_dict() for w in load], **chosen}

    def _warm_up(self, workers: list[str]) -> None:
        """Import the shard's code and find the engine on workers new to this run, before any
        agreed instant: a first task otherwise spends seconds importing and starts late."""
        cold = [w for w in workers if w not in self._warm]
        if cold:
            self.cluster.client.run(prepare_worker, workers=cold)
            self._warm.update(cold)

    def run_load(self, argv: list[str], directory: Path, limit_s: float, label: str) -> None:
        params = json.loads(Path(argv[argv.index("--params") + 1]).read_text()) if "--params" in argv else None
        plans = split_params(argv, params, self.shards) if params is not None else split_load(argv, self.shards)
        client = self.cluster.client
        try:
            workers = [w.address for w in self.cluster.require_load_workers(self.shards, self.load_hosts)]
            self._warm_up(workers)
            before = measure_offsets(client, workers)
            check_offsets(before, self.max_offset_s)
        except ClusterError as e:  # the cluster changed since the run started: the pair waits for --resume
            raise ClusterFault(str(e)) from None
        records = "records" in params if params is not None else "--records" in argv
        offsets = {w: o.offset_s for w, o in before.items()}
        barrier = f"archlab-load-{label}-{uuid.uuid4().hex[:8]}"
        ready, instant = Queue(barrier, client=client), Variable(barrier, client=client)
        futures = [
            client.submit(run_shard, p.index, p.argv, barrier, offsets, limit_s, records, p.params, resources={LOAD_RESOURCE: 1},
                          workers=workers, pure=False, key=f"{barrier}-shard{p.index}")
            for p in plans
        ]  # fmt: skip
        try:
            start_at = self._agree_on_start(futures, ready, instant, limit_s)
        except BaseException:
            instant.set(0.0)  # shards already waiting give up (they would start far too late)
            self._collect(futures, limit_s)
            raise
        finally:
            ready.close()
        outcomes, faults = self._collect(futures, limit_s)
        instant.delete()
        if faults:
            raise ClusterFault("load shards lost: " + "; ".join(faults))
        done = [o for o in outcomes if o is not None]
        after = measure_offsets(client, [o.worker for o in done])
        seed = params.get("seed") if params is not None else (int(argv[argv.index("--seed") + 1]) if "--seed" in argv else None)
        self._write(plans, done, before, after, start_at, directory, seed)

    def _agree_on_start(self, futures: list, ready, instant, limit_s: float) -> float:
        """Wait until every shard is ready on its worker, then publish the start instant."""
        waiting = set(range(len(futures)))
        deadline = time.monotonic() + limit_s
        while waiting:
            failed = [k for k, f in enumerate(futures) if f.status in ("error", "cancelled", "lost")]
            if failed:
                raise ClusterFault("load shards lost before the start: " + "; ".join(f"shard {k}: {_reason(futures[k])}" for k in failed))
            if time.monotonic() > deadline:
                raise ClusterFault(f"load shards {sorted(waiting)} were not running within {limit_s:g} s (workers busy or lost)")
            try:
                waiting.discard(int(ready.get(timeout=0.5)))
            except TimeoutError:
                continue
        start_at = time.time() + self.lead_s
        instant.set(start_at)
        return start_at

    def _collect(self, futures: list, limit_s: float) -> tuple[list[ShardOutcome | None], list[str]]:
        """Every shard's outcome (waiting for all: none may still load the server after this
        cell), and the faults of those that did not finish."""
        outcomes: list[ShardOutcome | None] = []
        faults: list[str] = []
        deadline = time.monotonic() + self.lead_s + limit_s + 10.0
        for k, future in enumerate(futures):
            try:
                outcomes.append(future.result(timeout=max(0.1, deadline - time.monotonic())))
            except ShardFailed as e:
                outcomes.append(None)
                faults.append(str(e))
            except ArchlabError:
                raise
            except Exception as e:  # Dask's own: KilledWorker, CommClosedError, TimeoutError, CancelledError
                outcomes.append(None)
                faults.append(f"shard {k}: {_dask_reason(e)}")
        if faults:
            for f in futures:
                f.cancel()
        return outcomes, faults
    def _write(self, plans, outcomes: list[ShardOutcome], before: dict[str, ClockOffset], after: dict[str, ClockOffset],
               start_at: float, directory: Path, seed: int | None) -> None:
        shard_dir = directory / "shards"
        failures = []
        docs, logs = [], []
        for o in outcomes:
            d = shard_dir / f"shard-{o.index}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "load.stderr").write_bytes(o.stderr)
            for name, content in (("summary.json", o.summary), ("hdr.log", o.hdr_log), ("records.bin", o.records)):
                if content is not None:
                    (d / name).write_bytes(content)
            if o.exit_code != 0 or o.summary is None or o.hdr_log is None:
                tail = o.stderr.decode("utf-8", "replace")[-2000:]
                failures.append(ProcessFailed(f"load shard {o.index} on {o.host} ({o.worker})", o.exit_text if o.exit_code != 0 else "wrote no summary", tail))
                continue
            docs.append(json.loads(o.summary))
            logs.append(o.hdr_log.decode("utf-8"))
        (directory / "load.stderr").write_bytes(b"".join(f"--- shard {o.index} ({o.worker})\n".encode() + o.stderr for o in outcomes))
        launched = [o.launched_at_s for o in outcomes]
        windows = [o.window_at_s for o in outcomes if o.window_at_s is not None]
        self.skews_s.append(max(launched) - min(launched))
        record = {
            "shards": len(outcomes),
            "agreed_start_s": start_at,
            "start_skew_s": max(launched) - min(launched),
            "window_skew_s": (max(windows) - min(windows)) if len(windows) == len(outcomes) else None,
            "cell_seed": seed,
            "shard": [
                {
                    "index": o.index, "worker": o.worker, "host": o.host, "pid": o.pid,
                    "users": plans[o.index].users, "rate_per_s": plans[o.index].rate_per_s, "seed": plans[o.index].seed,
                    "start_late_s": o.launched_at_s - start_at,
                    "window_opened_late_s": (o.window_at_s - min(windows)) if o.window_at_s is not None and windows else None,
                    "clock_offset_start": before[o.worker].to_dict(), "clock_offset_end": after[o.worker].to_dict(),
                    "exit": o.exit_text,
                    **_shard_verdict(docs, o, outcomes),
                }
                for o in outcomes
            ],
        }  # fmt: skip
        (directory / "shards.json").write_text(json.dumps(record, indent=2) + "\n")
        if failures:
            raise failures[0]
        merged = merge_shards(docs, logs, seed=seed)
        (directory / "hdr.log").write_text(merged.log_text)
        (directory / "summary.json").write_text(json.dumps(merged.summary, indent=2) + "\n")


def _shard_verdict(docs: list[dict], o: ShardOutcome, outcomes: list[ShardOutcome]) -> dict:
    if o.summary is None:
        return {"generator_bound": None, "bound_reasons": [], "requests": None}
    try:
        doc = json.loads(o.summary)
    except ValueError:
        return {"generator_bound": None, "bound_reasons": [], "requests": None}
    gen = doc.get("generator") or {}
    return {"generator_bound": gen.get("bound"), "bound_reasons": gen.get("bound_reasons") or [], "requests": doc.get("requests")}


def _reason(future) -> str:
    try:
        e = future.exception(timeout=1.0)
    except Exception as error:  # the future itself is gone
        return _dask_reason(error)
    return str(e) if isinstance(e, ShardFailed) else _dask_reason(e) if e is not None else future.status


def _dask_reason(e: BaseException) -> str:
    name = type(e).__name__
    if name == "KilledWorker":
        return f"its worker was lost mid-cell ({e})"
    if name in ("TimeoutError", "CancelledError"):
        return f"no result before the cell's time limit ({name}); a worker may have been lost"
    return f"{name}: {e}"


__all__ = ["ClusterError", "ClusterFault", "ShardedLoad"]
