"""Published orders checked against measured cells, so that a results page says "holds in k of n
cells" because a program counted it, not because someone read a table. A claim names an
architecture and the ones it is said to beat (``best``) or to trail (``worst``), optionally only
for some workloads or concurrencies; each cell (workload x concurrency, and the levels of any
other factor the run varies, such as an added delay or a receive buffer) where all of them were
measured either bears the claim out or not, and where it does, whether clearly (the subject's
throughput interval clear of every rival's) or only in the means. Cells come from a stored run
(every successful repetition, Student-t intervals over repetitions) or from a results table as
``archlab run`` and ``archlab report`` print it (a mean and its half-width per row), which is how
the tables pasted in ``experiments/README.md`` are checked against the prose beside them."""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Mapping, Sequence

from archlab import documents
from archlab.errors import SpecError
from archlab.stats import mean_confidence_interval
from archlab.store import RunView

Kind = Literal["best", "worst"]
CLAIM_KEYS = ("text", "best", "worst", "of", "workload", "concurrency")


@dataclass(frozen=True)
class Claim:
    text: str
    kind: Kind
    subject: str
    rivals: tuple[str, ...]
    workloads: tuple[str, ...] = ()  # empty: every workload
    concurrencies: tuple[int, ...] = ()  # empty: every concurrency

    def applies(self, workload: str, concurrency: int | None) -> bool:
        return (not self.workloads or workload in self.workloads) and (
            not self.concurrencies or concurrency in self.concurrencies)


@dataclass(frozen=True)
class Throughput:
    """One architecture's throughput in one cell: the mean and the half-width of its interval
    (None with a single repetition)."""

    mean: float
    half_width: float | None

    @property
    def low(self) -> float:
        return self.mean - (self.half_width or 0.0)

    @property
    def high(self) -> float:
        return self.mean + (self.half_width or 0.0)


# (workload, concurrency), and a third element naming the levels of any other factor the run
# varies ("network.delay_up=5ms, rcvbuf=4096"), so that cells differing only there are never pooled.
CellName = tuple
# Factors a cell name already holds (the mix is the workload's text in a mixed run).
_NAMED = frozenset({"architecture", "workload", "concurrency", "mix"})


@dataclass
class Cells:
    """Throughput per cell and architecture."""

    by_cell: dict[CellName, dict[str, Throughput]] = field(default_factory=dict)

    @classmethod
    def from_run(cls, view: RunView) -> "Cells":
        values: dict[CellName, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in view.rows:
            if r.ok and r.measurement is not None and r.cell.architecture and r.cell.workload:
                values[_run_cell(r.cell.workload, r.cell.concurrency, r.cell.factors)][r.cell.architecture].append(
                    r.measurement.throughput_rps)
        out = cls()
        for cell, archs in values.items():
            out.by_cell[cell] = {}
            for arch, xs in archs.items():
                ci = mean_confidence_interval(xs) if len(xs) >= 2 else None
                out.by_cell[cell][arch] = Throughput(sum(xs) / len(xs), ci.half_width if ci else None)
        return out

    @classmethod
    def from_table(cls, text: str, where: str) -> "Cells":
        """Rows of a results table as archlab prints it (marker, architecture, workload, conc,
        throughput [± half-width], ...); lines that are not rows are skipped."""
        out = cls()
        for line in text.splitlines():
            m = _ROW.match(line)
            if not m:
                continue
            half = _number(m["half"]) if m["half"] else None
            cell: CellName = (m["workload"], int(m["conc"]))
            if m["others"]:
                cell = (*cell, m["others"])
            out.by_cell.setdefault(cell, {})[m["arch"]] = Throughput(_number(m["mean"]), half)
        if not out.by_cell:
            raise SpecError("--table", "a results table as archlab prints it (architecture, workload, conc, throughput columns)", where)
        return out


def _run_cell(workload: str, concurrency: int | None, factors: Mapping[str, object]) -> CellName:
    # As the results table labels a row whose cells differ in such a factor: "netty (k=v, k2=v2)".
    others = ", ".join(f"{k}={v}" for k, v in sorted(factors.items()) if k not in _NAMED)
    return (workload, concurrency, others) if others else (workload, concurrency)


_NUM = r"[0-9][0-9,]*(?:\.[0-9]+)?"
_ROW = re.compile(
    rf"^\s*(?:\(\*\)|\*)?\s*(?P<arch>[a-z][a-z0-9:-]*)(?:\s+\((?P<others>[^)]*)\))?\s+(?P<workload>/\S+)\s+(?P<conc>[0-9]+)\s+"
    rf"(?P<mean>{_NUM})(?:\s*±\s*(?P<half>{_NUM}))?\s"
)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass(frozen=True)
class Verdict:
    cell: CellName
    holds: bool
    clearly: bool
    #: The rival that beat the subject (best) or that it beat (worst), when the claim fails.
    against: str | None
    subject: Throughput
    other: Throughput | None


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    verdicts: tuple[Verdict, ...]

    @property
    def held(self) -> int:
        return sum(v.holds for v in self.verdicts)

    def line(self) -> str:
        n, k = len(self.verdicts), self.held
        if n == 0:
            return f"{self.claim.text}: no cell measures {self.claim.subject} with all of {', '.join(self.claim.rivals)}"
        clear = sum(v.holds and v.clearly for v in self.verdicts)
        intervals = any(v.subject.half_width is not None for v in self.verdicts)
        note = f" ({clear} clearly)" if intervals else " (means only: one repetition)"
        head = f"{self.claim.text}: holds in {k} of {n} cell{'s' if n != 1 else ''}" + (note if k else "")
        fails = [v for v in self.verdicts if not v.holds]
        if not fails:
            return head
        shown = "; ".join(_failure(self.claim, v) for v in fails)
        return f"{head}; not at {shown}"


def _cell_name(cell: CellName) -> str:
    workload, conc, *others = cell
    name = f"{workload} c{conc}" if conc is not None else workload
    return " ".join([name, *others])


def _failure(claim: Claim, v: Verdict) -> str:
    assert v.other is not None and v.against is not None
    sign = ">" if claim.kind == "best" else "<"
    return f"{_cell_name(v.cell)} ({v.against} {v.other.mean:,.0f} {sign} {claim.subject} {v.subject.mean:,.0f})"


def check(claim: Claim, cells: Cells) -> Outcome:
    verdicts = []
    for cell in sorted(cells.by_cell, key=lambda c: (c[0], c[1] if c[1] is not None else -1, *c[2:])):
        archs = cells.by_cell[cell]
        if not claim.applies(cell[0], cell[1]) or claim.subject not in archs or any(r not in archs for r in claim.rivals):
            continue
        me = archs[claim.subject]
        rivals = [(r, archs[r]) for r in claim.rivals]
        if claim.kind == "best":
            name, top = max(rivals, key=lambda x: x[1].mean)
            holds, clearly = me.mean > top.mean, all(me.low > t.high for _, t in rivals) and me.half_width is not None
        else:
            name, top = min(rivals, key=lambda x: x[1].mean)
            holds, clearly = me.mean < top.mean, all(me.high < t.low for _, t in rivals) and me.half_width is not None
        verdicts.append(Verdict(cell, holds, holds and clearly, None if holds else name, me, None if holds else top))
    return Outcome(claim, tuple(verdicts))


def load_claims(path: Path) -> list[Claim]:
    """The ``[[claims]]`` of a TOML file; each names ``best`` or ``worst``, the rivals ``of``,
    and optionally ``workload`` and ``concurrency`` lists."""
    where = str(path)
    try:
        doc = tomllib.loads(documents.read_text(path))
    except OSError as e:
        raise SpecError("--claims", "a readable UTF-8 TOML file", where, hint=e.strerror or str(e)) from None
    except UnicodeDecodeError as e:
        raise SpecError("--claims", "a readable UTF-8 TOML file", where, hint=str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError("--claims", "valid TOML", where, hint=str(e)) from None
    items = doc.get("claims")
    if not isinstance(items, list) or not items or not all(isinstance(c, dict) for c in items):
        raise SpecError(f"{where}: claims", "one or more [[claims]] tables", doc.get("claims"))
    out = []
    for i, c in enumerate(items):
        at = f"{where}: claims[{i}]"
        if unknown := sorted(set(c) - set(CLAIM_KEYS)):
            raise SpecError(f"{at}.{unknown[0]}", "one of " + ", ".join(CLAIM_KEYS), unknown[0])
        kinds = [k for k in ("best", "worst") if k in c]
        if len(kinds) != 1 or not isinstance(c[kinds[0]], str):
            raise SpecError(at, "exactly one of best = \"ARCH\" or worst = \"ARCH\"", {k: c[k] for k in ("best", "worst") if k in c})
        rivals = c.get("of")
        if not isinstance(rivals, list) or not rivals or not all(isinstance(r, str) for r in rivals):
            raise SpecError(f"{at}.of", "a non-empty list of architecture names", rivals)
        workloads = _strings(c.get("workload", []), f"{at}.workload")
        concs = c.get("concurrency", [])
        if not isinstance(concs, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in concs):
            raise SpecError(f"{at}.concurrency", "a list of whole numbers", concs)
        kind: Kind = "best" if kinds[0] == "best" else "worst"
        text = c.get("text", f"{c[kind]} {'beats' if kind == 'best' else 'trails'} {', '.join(rivals)}")
        if not isinstance(text, str):
            raise SpecError(f"{at}.text", "a string", text)
        out.append(Claim(text, kind, c[kind], tuple(rivals), workloads, tuple(concs)))
    return out


def _strings(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise SpecError(key, "a list of strings", value)
    return tuple(value)


def table_section(text: str, heading: str | None, where: str) -> str:
    """The first fenced block after the first heading line containing ``heading`` (backticks
    of the heading ignored; the whole text without one)."""
    if heading is None:
        return text
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("#") and heading in line.replace("`", "")), None)
    if at is None:
        raise SpecError("--section", f"text of a heading in {where}", heading)
    start = next((i for i in range(at + 1, len(lines)) if lines[i].startswith("```")), None)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("```")), None) if start is not None else None
    if start is None or end is None:
        raise SpecError("--section", f"a heading followed by a fenced table in {where}", heading)
    return "\n".join(lines[start + 1:end])


def report(claims: Sequence[Claim], cells: Cells) -> list[str]:
    return [check(c, cells).line() for c in claims]


def outcomes(claims: Iterable[Claim], cells: Cells) -> list[Outcome]:
    return [check(c, cells) for c in claims]
