"""Progress of a run on stderr: cells done out of total, the cell running now, the last result
(throughput and p99) and an ETA from the mean time per cell so far. On a terminal it is one line
rewritten in place; otherwise (CI logs, pipes) one line per finished cell, so logs stay readable."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from archlab.spec.model import Cell
from archlab.store.records import DEFAULT_MAX_FOREIGN, CellRecord


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def describe_result(record: CellRecord) -> str:
    m = record.measurement
    if record.status != "ok" or m is None:
        first_line = (record.error or "failed").splitlines()[0]
        return f"FAILED: {first_line}"
    law = record.littles_law
    flag = f", Little's law flagged: X(R+Z)/N = {law.ratio:.3f}" if law is not None and not law.ok else ""
    c = record.conditions
    if c is not None and c.disturbed(DEFAULT_MAX_FOREIGN):
        flag += f", disturbed: {c.foreign_share + c.steal_share:.0%} of the measured CPUs went to other work"
    return f"{m.throughput_rps / 1000:.1f} krps, p99 {m.p99_us / 1000:.2f} ms{flag}"


class Progress:
    def __init__(self, total: int, done: int, stream: TextIO | None = None):
        self.total = total
        self.done = done
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty()
        self._times: list[float] = []
        self._last = ""
        self._started_at = 0.0

    def extend(self, more: int) -> None:
        """``more`` cell runs were added to the total (a round of adaptive repetitions)."""
        self.total += more

    def _eta(self) -> str:
        if not self._times:
            return "ETA --:--"
        mean = sum(self._times) / len(self._times)
        return f"ETA {_clock(mean * (self.total - self.done))}"

    def _emit(self, text: str) -> None:
        if self.live:
            # Clipped to the terminal: a wrapped line could not be rewritten in place.
            width = shutil.get_terminal_size().columns
            self.stream.write("\r\x1b[2K" + text[: max(width - 1, 20)])
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def cell_started(self, cell: Cell, repetition: int) -> None:
        self._started_at = time.monotonic()
        if self.live:  # a log gets one line per finished cell, not two
            last = f" | last: {self._last}" if self._last else ""
            self._emit(f"[{self.done}/{self.total}] running {cell.cell_id} rep {repetition}{last} | {self._eta()}")

    def cell_finished(self, cell: Cell, repetition: int, record: CellRecord) -> None:
        self._times.append(time.monotonic() - self._started_at)
        self.done += 1
        self._last = f"{cell.cell_id} rep {repetition}: {describe_result(record)}"
        self._emit(f"[{self.done}/{self.total}] {self._last} | {self._eta()}")

    def note(self, text: str) -> None:
        """A line of its own, kept in the log and on the terminal (not rewritten)."""
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()
