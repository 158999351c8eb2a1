"""The method every benchmark in bench/ shares, so that a skeptic reads one rule for all of them.

Contenders are measured in many short repetitions after the same warm-up, alternating in every
repetition (the order is rotated, so no contender always runs first, right after a warm cache or
a quiet neighbour), and each repetition yields the same statistic for every contender (a rate of
work, higher is better, or a time, lower is better). Comparisons are made per repetition: the
ratio of the two contenders' statistics in the same repetition, which cancels the slow drift of
a shared VM; the table quotes the median of those per-pair ratios with a seeded percentile
bootstrap 95% interval, and a target counts as met only when the whole interval clears it. Each
contender's CPU time per unit of work is taken from the kernel's own accounting (utime + stime of
``/proc/<pid>/stat`` for a process, ``getrusage`` for this one or its children), which steal time
on a VM does not inflate, unlike wall time. Every bench writes its table with the machine's facts
(CPU model, kernel, cores, the versions of every peer) as JSON under ``bench/results/``.

Nothing here blocks except the contenders' own calls: a repetition runs them one after another
on the calling thread.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20261122


@dataclass(frozen=True)
class Sample:
    """One contender's result in one repetition: ``value`` is the compared statistic (its
    meaning and unit are the comparison's), ``work`` the units of work done (requests, events,
    rows) and ``cpu_s`` the CPU seconds spent on them (NaN when not measured)."""

    value: float
    work: float = float("nan")
    cpu_s: float = float("nan")
    extra: dict = field(default_factory=dict)
    #: The part of ``cpu_s`` spent in the kernel (stime), NaN when not measured.
    system_s: float = float("nan")

    @property
    def cpu_per_unit_us(self) -> float:
        return self._per_unit_us(self.cpu_s)

    @property
    def system_per_unit_us(self) -> float:
        return self._per_unit_us(self.system_s)

    def _per_unit_us(self, seconds: float) -> float:
        return seconds / self.work * 1e6 if self.work and self.work == self.work else float("nan")


@dataclass(frozen=True)
class Interval:
    """The median of per-pair ratios and its bootstrap interval."""

    median: float
    low: float
    high: float
    confidence: float = 0.95

    def clears(self, target: float) -> bool:
        """The interval lies entirely at or above ``target`` (ratios are oriented so that
        larger means archlab is ahead)."""
        return self.low >= target

    def __str__(self) -> str:
        return f"{self.median:.3g}x [{self.low:.3g}, {self.high:.3g}]"


def median_ratio_interval(numerators: Sequence[float], denominators: Sequence[float], *,
                          confidence: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
                          seed: int = BOOTSTRAP_SEED) -> Interval:
    """Median of the per-pair ratios ``numerators[i] / denominators[i]`` with a percentile
    bootstrap interval: the pairs are resampled with replacement ``resamples`` times (seeded, so
    a table is reproducible from its raw repetitions) and the interval is the central
    ``confidence`` share of the resampled medians."""
    if len(numerators) != len(denominators) or not numerators:
        raise ValueError(f"pairs: expected two equal, non-empty lists, got {len(numerators)} and {len(denominators)}")
    import numpy as np

    ratios = np.asarray(numerators, dtype=float) / np.asarray(denominators, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.sort(np.median(ratios[rng.integers(0, ratios.size, (resamples, ratios.size))], axis=1))
    tail = (1.0 - confidence) / 2.0
    low = medians[int(tail * resamples)]
    high = medians[min(resamples - 1, int((1.0 - tail) * resamples))]
    return Interval(float(np.median(ratios)), float(low), float(high), confidence)


@dataclass
class Contender:
    """A named way of doing the work: ``run()`` performs one timed repetition and returns its
    :class:`Sample`; ``warmup()`` (default: one untimed ``run()``) prepares it."""

    name: str
    run: Callable[[], Sample]
    version: str = ""
    warmup: Callable[[], object] | None = None


@dataclass
class Alternation:
    """Every contender's samples, repetition by repetition (``samples[name][i]``)."""

    contenders: list[str]
    samples: dict[str, list[Sample]]

    def values(self, name: str) -> list[float]:
        return [s.value for s in self.samples[name]]

    def ratio(self, archlab: str, peer: str, higher_is_better: bool) -> Interval:
        """archlab's advantage over ``peer``: rate_archlab / rate_peer, or time_peer / time_archlab."""
        a, p = self.values(archlab), self.values(peer)
        return median_ratio_interval(a, p) if higher_is_better else median_ratio_interval(p, a)

    def cpu_ratio(self, archlab: str, peer: str) -> Interval:
        """archlab's advantage in CPU time per unit of work: (peer's CPU per unit) / (archlab's),
        pair by pair. Steal time and waiting for a busy CPU do not enter it, unlike wall time."""
        return median_ratio_interval([s.cpu_per_unit_us for s in self.samples[peer]],
                                     [s.cpu_per_unit_us for s in self.samples[archlab]])

    def cpu_per_unit_us(self, name: str) -> float:
        """Median CPU microseconds per unit of work over the repetitions."""
        values = [s.cpu_per_unit_us for s in self.samples[name]]
        values = [v for v in values if v == v]
        return statistics.median(values) if values else float("nan")


def alternate(contenders: Sequence[Contender], repetitions: int, *, progress: bool = True) -> Alternation:
    """Warm every contender up once, then run ``repetitions`` rounds; round i starts with
    contender i mod k and goes on in order, so each runs first equally often."""
    if repetitions < 1:
        raise ValueError(f"repetitions: expected an integer >= 1, got {repetitions}")
    for c in contenders:
        (c.warmup or c.run)()
    names = [c.name for c in contenders]
    samples: dict[str, list[Sample]] = {n: [] for n in names}
    k = len(contenders)
    for i in range(repetitions):
        for j in range(k):
            c = contenders[(i + j) % k]
            samples[c.name].append(c.run())
        if progress:
            shown = "  ".join(f"{n} {samples[n][-1].value:.4g}" for n in names)
            print(f"  rep {i + 1:>2}/{repetitions}: {shown}", file=sys.stderr, flush=True)
    return Alternation(names, samples)


# --- CPU time -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuTime:
    """CPU seconds as the kernel splits them: in user space and in the kernel."""

    user: float
    system: float

    @property
    def total(self) -> float:
        return self.user + self.system

    def __sub__(self, earlier: CpuTime) -> CpuTime:
        return CpuTime(self.user - earlier.user, self.system - earlier.system)


def process_cpu(pid: int) -> CpuTime:
    """utime and stime of a live process (fields 14 and 15 of /proc/<pid>/stat, after the
    parenthesised command name, which may itself hold spaces)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return CpuTime(int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS)


def process_cpu_s(pid: int) -> float:
    """utime + stime of a live process, in seconds."""
    return process_cpu(pid).total


def self_cpu_s() -> float:
    """CPU seconds of this process, every thread (getrusage RUSAGE_SELF)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu() -> CpuTime:
    """CPU time of the waited-for children of this process (getrusage RUSAGE_CHILDREN)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return CpuTime(r.ru_utime, r.ru_stime)


def children_cpu_s() -> float:
    """CPU seconds of the waited-for children of this process."""
    return children_cpu().total


def timed(work: Callable[[], float]) -> Sample:
    """Run ``work()`` in this process; the sample's value is its wall time in seconds, ``work``
    what it returned (units of work) and ``cpu_s`` this process's CPU time meanwhile."""
    cpu, wall = self_cpu_s(), time.perf_counter()
    units = work()
    return Sample(time.perf_counter() - wall, float(units), self_cpu_s() - cpu)


def pin_self(cpu: int) -> None:
    """Run this process (and the children it starts from now on) on one CPU."""
    os.sched_setaffinity(0, {cpu})


# --- machine facts and results --------------------------------------------------------------------

def machine_facts(tools: dict[str, str] | None = None) -> dict:
    """What a reader needs to compare figures across machines."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    steal = ""
    try:
        steal = Path("/proc/stat").read_text().splitlines()[0].split()[8]
    except (OSError, IndexError):
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "steal_ticks_at_start": steal, "tools": dict(tools or {}),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def tool_version(command: Sequence[str], pattern: str | None = None) -> str:
    """The first line a tool prints about its version (or the part matching ``pattern``)."""
    import re

    try:
        done = subprocess.run(list(command), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"
    text = (done.stdout + done.stderr).strip()
    if pattern:
        m = re.search(pattern, text)
        return m.group(0) if m else text.splitlines()[0] if text else "unknown"
    return text.splitlines()[0] if text else "unknown"


def package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def write_results(bench: str, table: list[dict], facts: dict, settings: dict, raw: dict | None = None) -> Path:
    """bench/results/<bench>.json: the table, the settings it was measured with, the machine, the
    time it was measured and the raw repetitions (so that intervals can be recomputed). The same
    document is kept as bench/results/history/<bench>-<UTC time>.json, so that the next run does
    not erase the figures of this one."""
    measured_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    document = {"bench": bench, "measured_at": measured_at, "machine": facts, "settings": settings, "table": table,
                "raw": raw or {}}
    text = json.dumps(_clean(document), indent=1, default=_plain, allow_nan=False)
    history = RESULTS / "history"
    history.mkdir(parents=True, exist_ok=True)
    (history / f"{bench}-{measured_at.replace('-', '').replace(':', '')}.json").write_text(text)
    path = RESULTS / f"{bench}.json"
    path.write_text(text)
    return path


def raw_samples(alternation: Alternation) -> dict:
    return {n: [asdict(s) for s in alternation.samples[n]] for n in alternation.contenders}


def _clean(value: object) -> object:
    """JSON has no NaN or infinity: they are written as null."""
    if hasattr(value, "__dataclass_fields__"):
        value = asdict(value)  # type: ignore[arg-type]
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def _plain(value: object) -> object:
    return str(value)


def verdict(interval: Interval, target: float) -> str:
    return f"meets >= {target:g}" if interval.clears(target) else f"does NOT establish >= {target:g}"


def chosen_parts(only: str | None, parts: Sequence[str]) -> set[str] | None:
    """The parts of a benchmark that ``--only`` selects (all without it), or None after printing
    one line naming the allowed parts and the unknown ones."""
    chosen = set(only.split(",")) if only else set(parts)
    if unknown := chosen - set(parts):
        print(f"bench: --only takes {','.join(parts)}; got {','.join(sorted(unknown))}", file=sys.stderr)
        return None
    return chosen


def count(minimum: int = 1) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum``; anything else is refused in one line that
    names the allowed values and what was received (argparse adds the option's name)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value
    return parse


def number(*, zero_allowed: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number > 0 (>= 0 with ``zero_allowed``): a duration, a size."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not (math.isfinite(value) and (value >= 0 if zero_allowed else value > 0)):
            bound = ">= 0" if zero_allowed else "> 0"
            raise argparse.ArgumentTypeError(f"expected a finite number {bound}, got {text!r}")
        return value
    return parse


def run_main(main: Callable[[], int]) -> NoReturn:
    """Run a bench's ``main`` and exit with its status. Ctrl-C, and a peer or the engine failing
    (a tool exits non-zero or hangs, a server does not come up), end in one line naming what
    happened: the context managers that started processes have stopped them on the way out, and
    no results file is written for a run that did not finish."""
    name = Path(sys.argv[0]).name
    try:
        status = main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted; no results written", file=sys.stderr)
        sys.exit(130)
    except subprocess.CalledProcessError as e:
        why = (e.stderr or "").strip().splitlines()[-1:] if isinstance(e.stderr, str) else []
        print(f"{name}: `{shlex.join(map(str, e.cmd))}` exited with status {e.returncode}"
              + (f": {why[0]}" if why else ""), file=sys.stderr)
        sys.exit(1)
    except subprocess.TimeoutExpired as e:
        print(f"{name}: `{shlex.join(map(str, e.cmd))}` did not finish within {e.timeout:g} s", file=sys.stderr)
        sys.exit(1)
    except RuntimeError as e:
        print(f"{name}: {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(status)
