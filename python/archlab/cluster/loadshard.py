"""One load shard, on the worker that runs it: report ready on the cell's barrier (a Dask
``Queue``), receive the agreed instant once every shard is ready (a Dask ``Variable`` the
client sets a little ahead of its clock), and start ``archlab-engine load --start-at`` at once
with this shard's users or rate into a private temporary directory: the engine does its set-up
while the lead lasts and then sleeps to the instant on this host's clock (the client's instant
plus this worker's measured offset) with an absolute ``clock_nanosleep``, so the shards' starts
do not depend on when Python or Dask get the CPU. The shard notes when the engine woke
(its ``phase start NS`` line, its own clock), when it announced ``phase measure`` and
``phase end`` (all converted back to the client's clock), waits for it within the cell's time
limit, and hands back its summary, interval log, raw records and stderr. The engine process
dies with the task's thread (``PR_SET_PDEATHSIG``) and is killed when the time limit passes; a
shard that would start late (its first worker was lost and the scheduler moved it) refuses to
start, so a repetition never mixes shards that did not run together."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from archlab.lab.load_shards import with_outputs
from archlab.errors import ArchlabError
from archlab.lab.engine import find_engine
from archlab.lab.processes import describe_exit, die_with_parent

#: How late after the agreed instant a shard may still start (a rescheduled shard is later).
LATE_LIMIT_S = 1.0


class ShardFailed(ArchlabError):
    """A shard could not run, or its generator failed."""


@dataclass
class ShardOutcome:
    index: int
    worker: str
    host: str
    exit_code: int | None
    exit_text: str
    #: Client-clock times (seconds since the epoch): the engine woke at the agreed instant (its spawn
    #: if it failed before), its window opened, closed.
    launched_at_s: float
    window_at_s: float | None
    end_at_s: float | None
    summary: bytes | None
    hdr_log: bytes | None
    records: bytes | None
    stderr: bytes
    pid: int
    worker_pid: int = field(default_factory=os.getpid)


def prepare_worker() -> str:
    """Run once per worker before its first shard: this module is imported (by unpickling this
    function) and the engine found, so a shard starts in milliseconds. Returns the engine."""
    return str(find_engine())


def run_shard(index: int, argv: tuple[str, ...], barrier: str, offsets_s: dict[str, float], limit_s: float,
              records: bool, params: dict | None = None) -> ShardOutcome:
    """Run shard ``index`` (its command ``argv``) at the instant the client publishes on
    ``barrier`` once every shard is ready."""
    from distributed import Queue, Variable, get_worker

    worker = get_worker().address
    if worker not in offsets_s:
        raise ShardFailed(f"shard {index}: ran on worker {worker}, which joined after the cell started (its first worker was lost)")
    offset = offsets_s[worker]
    Queue(barrier).put(index)
    try:
        start_at_s = float(Variable(barrier).get(timeout=limit_s))
    except TimeoutError:
        raise ShardFailed(f"shard {index}: the other shards were not ready within {limit_s:g} s") from None
    target = start_at_s + offset
    late = time.time() - target
    if late > LATE_LIMIT_S:
        raise ShardFailed(f"shard {index}: would start {late:.2f} s after the cell's agreed instant on worker {worker} "
                          "(its first worker was lost, or the workers are overloaded)")
    directory = Path(tempfile.mkdtemp(prefix=f"archlab-shard-{index}-"))
    try:
        outputs = {"--json": str(directory / "summary.json"), "--hdr-log": str(directory / "hdr.log")}
        if params is not None:  # `load --params FILE`: this shard's parameters, records kept here
            own = {k: v for k, v in params.items() if k != "records"}
            if records:
                own["records"] = str(directory / "records.bin")
            (directory / "load.params.json").write_text(json.dumps(own))
            outputs["--params"] = str(directory / "load.params.json")
        elif records:
            outputs["--records"] = str(directory / "records.bin")
        command = with_outputs(argv, str(find_engine()), outputs) + ["--start-at", format_unix_time(target)]
        with open(directory / "load.stderr", "wb") as err:
            popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                                     preexec_fn=die_with_parent(os.getpid()), start_new_session=True)
        spawned = time.time() - offset
        started_at, window_at, end_at = _follow(popen, limit_s, offset)
        code = popen.poll()

        def read(name: str) -> bytes | None:
            p = directory / name
            return p.read_bytes() if p.exists() else None

        # An engine that failed before its instant printed no start: its spawn stands for it.
        launched = started_at if started_at is not None else spawned
        return ShardOutcome(index, worker, socket.gethostname(), code, describe_exit(code), launched, window_at, end_at,
                            read("summary.json"), read("hdr.log"), read("records.bin") if records else None,
                            read("load.stderr") or b"", popen.pid)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def format_unix_time(seconds: float) -> str:
    """An instant as ``load --start-at`` reads it: seconds since the epoch, 9 fraction digits."""
    ns = round(Fraction(seconds) * 1_000_000_000)  # exact: a float times 1e9 rounds in binary first
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def _follow(popen: subprocess.Popen, limit_s: float, offset_s: float) -> tuple[float | None, float | None, float | None]:
    """Read the engine's phase lines until it exits or ``limit_s`` passes (then kill it):
    when it woke at its start instant (its own clock's stamp), opened and closed its window."""
    assert popen.stdout is not None
    deadline = time.monotonic() + limit_s
    started_at = window_at = end_at = None
    buffer = b""
    fd = popen.stdout.fileno()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.killpg(popen.pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            now = time.time() - offset_s
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.startswith(b"phase start "):
                    started_at = int(line.split()[2]) / 1e9 - offset_s
                elif line.strip() == b"phase measure":
                    window_at = now
                elif line.strip() == b"phase end":
                    end_at = now
        popen.wait(timeout=max(1.0, deadline - time.monotonic()))
    except BaseException:
        if popen.poll() is None:
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
        raise
    finally:
        popen.stdout.close()
    return started_at, window_at, end_at
