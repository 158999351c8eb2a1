"""The load of one cell spread over M fronts side by side (seed 002's two middlewares, each
driven by its own client machines): the cell's load parameters split into M shards by
:func:`archlab.lab.load_shards.split_params` (closed-model users divided as integers, rates
evenly, a seed of its own per shard), shard k pointed at front k, the M load generators started
together on this host, and their summaries and interval logs merged exactly by
:func:`archlab.lab.load_merge.merge_shards` (counts summed, the headline latency recomputed from
the sum of the histograms, never an average of quantiles). Each shard's files stay in
``shards/shard-K/`` of the repetition, the merged summary and log where one generator's would be,
and ``shards.json`` says which shard drove which front with how many users.

Where the lab blocks: on one queue fed by a relay thread per generator (its stdout lines); the
processes of the topology are probed when the last generator opens its measurement window and
when the last one closes it, so the window's CPU covers every shard's measurement."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable

from archlab.errors import InvalidValue
from archlab.lab.engine import Engine
from archlab.lab.load_merge import merge_shards
from archlab.lab.load_shards import split_params
from archlab.lab.processes import ManagedProcess, ProcessGroup, describe_exit
from archlab.lab.runner import CellFailed, RepFiles, RunnerConfig, Window
from archlab.spec.model import Experiment

_EXIT_WAIT_S = 5.0  # for a generator that printed its last line to exit


def shard_params(params: dict, targets: list[str], directory: Path) -> list[dict]:
    """Shard k's load parameters: its share of ``params`` (the cell's, checked), aimed at
    ``targets[k]``, its raw records (when kept) in ``directory/shard-K/``. Refused naming the
    parameter when there are fewer closed-model users than fronts."""
    try:
        plans = split_params([], params, len(targets))
    except InvalidValue:  # said in the topology's terms rather than the split's
        raise CellFailed(f"{params.get('connections')} connections cannot be spread over {len(targets)} fronts: each needs at least one") from None
    out = []
    for plan, target in zip(plans, targets):
        own = {**(plan.params or {}), "target": target}
        if "records" in own:
            own["records"] = str(directory / f"shard-{plan.index}" / "records.bin")
        out.append(own)
    return out


def drive_spread(
    group: ProcessGroup,
    engine: Engine,
    params: dict,
    targets: list[str],
    probe: Callable[[], Any],
    check_alive: Callable[[], None],
    exp: Experiment,
    files: RepFiles,
    config: RunnerConfig,
) -> Window:
    """One load generator per address of ``targets`` with its share of ``params``, run to their
    end together; the merged summary and interval log written to ``files`` as one generator's
    would be. Returns the probes bracketing the measurement window."""
    shard_dir = files.directory / "shards"
    shares = shard_params(params, targets, shard_dir)
    window = Window.opened(probe(), "before load start", group)
    lines: queue.Queue[tuple[int, str | None]] = queue.Queue()
    procs: list[ManagedProcess] = []
    limit_s = exp.warmup_s + exp.duration_s + exp.load.timeout_s + config.load_slack_s
    deadline = time.monotonic() + limit_s
    try:
        for k, own in enumerate(shares):
            d = shard_dir / f"shard-{k}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "load.params.json").write_text(json.dumps(own, indent=2) + "\n")
            argv = engine.load_argv(d / "load.params.json", d / "summary.json", d / "hdr.log")
            procs.append(group.start(f"load generator {k} (front {targets[k]})", argv, d / "load.stderr"))
        for k, proc in enumerate(procs):
            threading.Thread(target=_relay, args=(k, proc, deadline, lines), daemon=True).start()
        measuring, ended, finished = set(), set(), 0
        while finished < len(procs):
            try:
                k, line = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                raise procs[0].failure(f"the {len(procs)} load generators did not finish within {limit_s:g} s") from None
            if line is None:
                finished += 1
            elif line == "phase measure":
                measuring.add(k)
                if len(measuring) == len(procs):
                    window.reopen(probe(), f"phase measure of the last of {len(procs)} generators")
            elif line == "phase end":
                ended.add(k)
                if len(ended) == len(procs):
                    window.close(probe(), f"phase end of the last of {len(procs)} generators")
        exits = [p.wait_exit(_EXIT_WAIT_S) for p in procs]
    finally:
        for p in procs:
            group.stop(p)
    check_alive()
    for k, code in enumerate(exits):
        if code != 0:
            raise procs[k].failure(describe_exit(code))
    if window.end is None:
        window.close(probe(), "after load exit")
    _merge(shard_dir, shares, targets, params.get("seed"), files)
    return window


def _relay(k: int, proc: ManagedProcess, deadline: float, out: queue.Queue) -> None:
    """Generator ``k``'s stdout lines onto ``out``, then ``None`` (its end, or the deadline)."""
    try:
        while (line := proc.read_line(deadline - time.monotonic())) is not None:
            out.put((k, line))
    except TimeoutError:
        pass  # the main loop's own deadline reports it
    out.put((k, None))


def _merge(shard_dir: Path, shares: list[dict], targets: list[str], seed: object, files: RepFiles) -> None:
    docs = [json.loads((shard_dir / f"shard-{k}" / "summary.json").read_text()) for k in range(len(shares))]
    logs = [(shard_dir / f"shard-{k}" / "hdr.log").read_text() for k in range(len(shares))]
    merged = merge_shards(docs, logs, seed=seed if isinstance(seed, int) else None)
    files.hdr_log.write_text(merged.log_text)
    files.summary.write_text(json.dumps(merged.summary, indent=2) + "\n")
    record = {
        "shards": len(shares),
        "how": "one load generator per front on this host, started together; merged exactly (archlab.lab.load_merge)",
        "shard": [
            {"index": k, "target": targets[k], "connections": own.get("connections"), "rate": own.get("rate"),
             "seed": own.get("seed"), "requests": docs[k].get("requests"), "throughput_rps": docs[k].get("throughput_rps")}
            for k, own in enumerate(shares)
        ],
    }  # fmt: skip
    (files.directory / "shards.json").write_text(json.dumps(record, indent=2) + "\n")
