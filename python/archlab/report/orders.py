"""Published orders checked against measured cells, so that a results page says "holds in k of n
cells" because a program counted it, not because someone read a table. A claim names an
architecture and the ones it is said to beat (``best``) or to trail (``worst``), optionally only
for some workloads or concurrencies; each cell (workload x concurrency, and the levels of any
other factor the run varies, such as an added delay or a receive buffer) where all of them were
measured either bears the claim out or not, and where it does, whether clearly (the subject's
throughput interval clear of every rival's) or only in the means. Cells come from a stored run
(every successful repetition, Student-t intervals over repetitions) or from a results table as
``archlab run`` and ``archlab report`` print it (a mean and its half-width per row), which is how
the tables pasted in ``experiments/README.md`` are checked against the prose beside them.

A claim may state what its mechanism needs to show (``needs``: the CPUs, the concurrency range,
saturated servers, quiet windows, the effect size to detect): a cell that misses one is "not
testable here", naming the precondition and the value measured, and never counts as a failure.
So a claim comes out as holding in k of n cells, failing in some, or not testable here. A
scalability claim (``coherency_grows``: the USL's kappa grows along workloads, seed 000 §7.6) is
judged on the USL fitted to each workload's points of a stored run, with the same preconditions."""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Mapping, Sequence

from archlab import documents
from archlab.errors import SpecError
from archlab.report.aggregate import SATURATED, measured_cpus_of, utilisation_of
from archlab.separation import rank
from archlab.stats import mean_confidence_interval
from archlab.store import ResultRow, RunView
from archlab.store.records import DEFAULT_MAX_FOREIGN

Kind = Literal["best", "worst"]
CLAIM_KEYS = ("text", "best", "worst", "of", "workload", "concurrency", "needs", "coherency_grows")
NEEDS_KEYS = ("cpus", "concurrency", "saturated", "quiet", "effect")


@dataclass(frozen=True)
class Needs:
    """What a claim's mechanism needs to show at all, so that a cell without it says "not
    testable here" rather than "fails" (``needs = {...}`` in a claims file)."""

    #: CPUs the measured server (or balancer) must be able to use.
    cpus: int | None = None
    #: The concurrency range where the mechanism shows (e.g. around a published N*).
    concurrency: tuple[int, int] | None = None
    #: Every contender's server CPUs saturated (U >= 0.9): a contest of capacities.
    saturated: bool = False
    #: No contender's repetition disturbed (more than 5% of its CPUs to other work).
    quiet: bool = False
    #: The effect the claim is about (0.2: 20%): the cell must be able to detect that much.
    effect: float | None = None

    def to_text(self) -> str:
        parts = []
        if self.cpus is not None:
            parts.append(f"{self.cpus} CPUs")
        if self.concurrency is not None:
            parts.append(f"concurrency {self.concurrency[0]}-{self.concurrency[1]}")
        if self.saturated:
            parts.append("saturated servers")
        if self.quiet:
            parts.append("quiet windows")
        if self.effect is not None:
            parts.append(f"power to see {_percent(self.effect)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Claim:
    text: str
    kind: Kind
    subject: str
    rivals: tuple[str, ...]
    workloads: tuple[str, ...] = ()  # empty: every workload
    concurrencies: tuple[int, ...] = ()  # empty: every concurrency
    needs: Needs = field(default_factory=Needs)

    def applies(self, workload: str, concurrency: int | None) -> bool:
        return (not self.workloads or workload in self.workloads) and (
            not self.concurrencies or concurrency in self.concurrencies)


@dataclass(frozen=True)
class CoherencyClaim:
    """A scalability claim: the USL's coherency (kappa) grows along ``workloads`` (e.g. with
    the message size), so the peak N* moves to fewer users (seed 000 §7.6). Judged on the USL
    fitted to each workload's points of a stored run (:func:`archlab.models.fromrun.fit_group`)."""

    text: str
    workloads: tuple[str, ...]
    needs: Needs = field(default_factory=Needs)


@dataclass(frozen=True)
class Throughput:
    """One architecture's throughput in one cell: the mean and the half-width of its interval
    (None with a single repetition), and, from a stored run, what its preconditions are judged
    on: each repetition's throughput, the server's CPU utilisation and CPUs, and whether a
    repetition was disturbed (None where the source does not say: a pasted table)."""

    mean: float
    half_width: float | None
    samples: tuple[float, ...] = ()
    utilisation: float | None = None
    cpus: int | None = None
    disturbed: bool | None = None

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
    #: The rows of a stored run, for claims judged on fits (None for a pasted table).
    rows: tuple[ResultRow, ...] | None = None

    @classmethod
    def from_run(cls, view: RunView) -> "Cells":
        rows: dict[CellName, dict[str, list[ResultRow]]] = defaultdict(lambda: defaultdict(list))
        for r in view.rows:
            if r.ok and r.measurement is not None and r.cell.architecture and r.cell.workload:
                rows[_run_cell(r.cell.workload, r.cell.concurrency, r.cell.factors)][r.cell.architecture].append(r)
        out = cls(rows=tuple(view.rows))
        for cell, archs in rows.items():
            out.by_cell[cell] = {}
            for arch, rs in archs.items():
                xs = [r.measurement.throughput_rps for r in rs if r.measurement is not None]
                ci = mean_confidence_interval(xs) if len(xs) >= 2 else None
                conditions = [r.conditions for r in rs if r.conditions is not None]
                out.by_cell[cell][arch] = Throughput(
                    sum(xs) / len(xs), ci.half_width if ci else None, tuple(xs), utilisation_of(rs), measured_cpus_of(rs),
                    any(c.disturbed(DEFAULT_MAX_FOREIGN) for c in conditions) if conditions else None,
                )
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
    #: The precondition this cell misses, with the value measured: then neither holds nor fails.
    untestable: str | None = None


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    verdicts: tuple[Verdict, ...]

    @property
    def testable(self) -> tuple[Verdict, ...]:
        """The cells that meet the claim's preconditions: only they hold or fail."""
        return tuple(v for v in self.verdicts if v.untestable is None)

    @property
    def held(self) -> int:
        return sum(v.holds for v in self.testable)

    @property
    def verdict(self) -> str:
        """holds, fails (in every testable cell), mixed, not testable here, or unmeasured."""
        if not self.verdicts:
            return "unmeasured"
        if not self.testable:
            return "not testable here"
        return {len(self.testable): "holds", 0: "fails"}.get(self.held, "mixed")

    def line(self) -> str:
        if not self.verdicts:
            return f"{self.claim.text}: no cell measures {self.claim.subject} with all of {', '.join(self.claim.rivals)}"
        untestable = [v for v in self.verdicts if v.untestable is not None]
        # One clause per precondition missed, naming its cells (all of them: "every cell").
        by_reason: dict[str, list[str]] = {}
        for v in untestable:
            by_reason.setdefault(v.untestable or "", []).append(_cell_name(v.cell))
        every = len(untestable) == len(self.verdicts) and len(self.verdicts) > 1
        reasons = "; ".join(
            f"{why} in {'every cell' if every and len(by_reason) == 1 else ', '.join(names)}" for why, names in by_reason.items()
        )
        testable = self.testable
        if not testable:
            return f"{self.claim.text}: not testable here: {reasons}"
        n, k = len(testable), self.held
        clear = sum(v.holds and v.clearly for v in testable)
        intervals = any(v.subject.half_width is not None for v in testable)
        note = f" ({clear} clearly)" if intervals else " (means only: one repetition)"
        head = f"{self.claim.text}: holds in {k} of {n} cell{'s' if n != 1 else ''}" + (note if k else "")
        if k < n:
            head += f"; fails in {n - k} of {n}: " + "; ".join(_failure(self.claim, v) for v in testable if not v.holds)
        if untestable:
            head += f"; not testable in {len(untestable)} more: {reasons}"
        return head


def _cell_name(cell: CellName) -> str:
    workload, conc, *others = cell
    name = f"{workload} c{conc}" if conc is not None else workload
    return " ".join([name, *others])


def _failure(claim: Claim, v: Verdict) -> str:
    assert v.other is not None and v.against is not None
    sign = ">" if claim.kind == "best" else "<"
    return f"{_cell_name(v.cell)} ({v.against} {v.other.mean:,.0f} {sign} {claim.subject} {v.subject.mean:,.0f})"


def untestable(needs: Needs, cell: CellName, contenders: Sequence[tuple[str, Throughput]]) -> str | None:
    """The first precondition of ``needs`` that ``cell`` misses, with what was measured; None
    when the cell can show the mechanism. A pasted table does not say the CPUs, the
    utilisation or the disturbance: a claim that needs them is checked on a stored run."""
    if needs.concurrency is not None:
        low, high = needs.concurrency
        if cell[1] is None or not low <= cell[1] <= high:
            return f"concurrency {cell[1]} outside {low}-{high}"
    for name, t in contenders:
        if needs.cpus is not None:
            if t.cpus is None:
                return "the source does not say the CPUs (check the stored run)"
            if t.cpus < needs.cpus:
                return f"{t.cpus} CPU{'s' if t.cpus != 1 else ''} for {name}, needs >= {needs.cpus}"
        if needs.saturated:
            if t.utilisation is None:
                return "the source does not say the utilisation (check the stored run)"
            if t.utilisation < SATURATED:
                return f"{name} server U = {t.utilisation:.2f} < {SATURATED}"
        if needs.quiet:
            if t.disturbed is None:
                return "the source does not say the interference (check the stored run)"
            if t.disturbed:
                return f"{name} disturbed (more than {DEFAULT_MAX_FOREIGN:.0%} of its CPUs went to other work)"
    if needs.effect is not None:
        detectable = _detectable(contenders)
        if detectable is None:
            return "fewer than 2 repetitions: no interval to detect an effect"
        if detectable > needs.effect:
            return f"smallest detectable difference {_percent(detectable)} > claimed effect {_percent(needs.effect)}"
    return None


def _percent(fraction: float) -> str:
    """A relative difference as a percentage with two significant digits below 10% (0.012 is
    "1.2%", 0.00028 "0.028%"), whole above."""
    if fraction >= 0.1:
        return f"{fraction:.0%}"
    return f"{float(f'{100 * fraction:.2g}'):g}%"


def _detectable(contenders: Sequence[tuple[str, Throughput]]) -> float | None:
    """The largest smallest-detectable difference between neighbours of the cell's ranking (the
    ratio intervals' half-widths), from the repetitions, or from the half-widths of a table."""
    if all(len(t.samples) >= 2 for _, t in contenders):
        comparisons = rank({name: list(t.samples) for name, t in contenders}).comparisons
        found = [c.detectable for c in comparisons]
        return None if any(d is None for d in found) else max(d for d in found if d is not None)
    if any(t.half_width is None or t.mean <= 0 for _, t in contenders):
        return None
    # A table: each side's relative half-width, combined as the ratio's (first order).
    return max((a.half_width / a.mean) + (b.half_width / b.mean)  # type: ignore[operator]
               for (_, a), (_, b) in zip(contenders, contenders[1:]))


def check(claim: Claim, cells: Cells) -> Outcome:
    verdicts = []
    for cell in sorted(cells.by_cell, key=lambda c: (c[0], c[1] if c[1] is not None else -1, *c[2:])):
        archs = cells.by_cell[cell]
        if not claim.applies(cell[0], cell[1]) or claim.subject not in archs or any(r not in archs for r in claim.rivals):
            continue
        me = archs[claim.subject]
        rivals = [(r, archs[r]) for r in claim.rivals]
        if (why := untestable(claim.needs, cell, [(claim.subject, me), *rivals])) is not None:
            verdicts.append(Verdict(cell, False, False, None, me, None, why))
            continue
        if claim.kind == "best":
            name, top = max(rivals, key=lambda x: x[1].mean)
            holds, clearly = me.mean > top.mean, all(me.low > t.high for _, t in rivals) and me.half_width is not None
        else:
            name, top = min(rivals, key=lambda x: x[1].mean)
            holds, clearly = me.mean < top.mean, all(me.high < t.low for _, t in rivals) and me.half_width is not None
        verdicts.append(Verdict(cell, holds, holds and clearly, None if holds else name, me, None if holds else top))
    return Outcome(claim, tuple(verdicts))


@dataclass(frozen=True)
class CoherencyOutcome:
    """The verdict on a :class:`CoherencyClaim`: its line says holds, fails or not testable."""

    claim: CoherencyClaim
    verdict: str
    detail: str

    def line(self) -> str:
        return f"{self.claim.text}: {self.verdict}" + (f": {self.detail}" if self.detail else "")


def check_coherency(claim: CoherencyClaim, cells: Cells) -> CoherencyOutcome:
    """Fit the USL to each workload's points and see whether kappa grows along the workloads,
    each step clear of the previous one's interval; not testable where the run cannot express
    the mechanism (its concurrency never reaches the range where the peak is, its windows were
    disturbed) or cannot be fitted."""
    from archlab.models.fromrun import fit_group, group_key
    from archlab.models.usl import USL

    def untestable(why: str) -> CoherencyOutcome:
        return CoherencyOutcome(claim, "not testable here", why)

    if cells.rows is None:
        return untestable("a table has no per-level points to fit (check the stored run)")
    by_workload = {w: [r for r in cells.rows if r.ok and r.cell.workload == w and r.measurement is not None]
                   for w in claim.workloads}
    if missing := [w for w, rs in by_workload.items() if not rs]:
        return CoherencyOutcome(claim, "unmeasured", f"no successful repetition of {', '.join(missing)}")
    rows = [r for rs in by_workload.values() for r in rs]
    needs = claim.needs
    highest = max(r.cell.concurrency or 0 for r in rows)
    if needs.concurrency is not None and highest < needs.concurrency[0]:
        low, high = needs.concurrency
        return untestable(f"concurrency measured up to {highest}, the peak it is about lies at {low}-{high}")
    if needs.cpus is not None:
        cpus = measured_cpus_of(rows)
        if cpus is None or cpus < needs.cpus:
            return untestable(f"{cpus if cpus is not None else 'unknown'} CPUs measured, needs >= {needs.cpus}")
    if needs.quiet:
        if any(r.conditions is None for r in rows):
            return untestable("the run does not say the interference")
        if disturbed := [r for r in rows if r.conditions is not None and r.conditions.disturbed(DEFAULT_MAX_FOREIGN)]:
            return untestable(f"{len(disturbed)} of {len(rows)} repetitions disturbed")
    fits = []
    for w, rs in by_workload.items():
        fit = fit_group(group_key(rs[0]), rs)
        if not isinstance(fit.model, USL) or fit.model.kappa_ <= 0:
            return untestable(f"{w}: no coherency to compare (the USL fit has kappa = 0 or fell back to Amdahl)")
        fits.append((w, fit.model))
    steps = []
    for (a, fa), (b, fb) in zip(fits, fits[1:]):
        grows = fb.kappa_ > fa.kappa_
        clear = fb.confint_.get("kappa", (fb.kappa_, fb.kappa_))[0] > fa.confint_.get("kappa", (fa.kappa_, fa.kappa_))[1]
        steps.append((a, b, fa.kappa_, fb.kappa_, grows, clear))
    text = "; ".join(f"kappa {k1:.3g} at {a} -> {k2:.3g} at {b}" + ("" if g else " (falls)") for a, b, k1, k2, g, _ in steps)
    if all(g for *_, g, _ in steps):
        return CoherencyOutcome(claim, "holds" + ("" if all(c for *_, c in steps) else " in the means"), text)
    return CoherencyOutcome(claim, "fails", text)


def load_claims(path: Path) -> list[Claim | CoherencyClaim]:
    """The ``[[claims]]`` of a TOML file; each names ``best`` or ``worst``, the rivals ``of``,
    and optionally ``workload`` and ``concurrency`` lists, or ``coherency_grows`` (workloads
    along which the USL's kappa grows); any of them ``needs``."""
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
    out: list[Claim | CoherencyClaim] = []
    for i, c in enumerate(items):
        at = f"{where}: claims[{i}]"
        if unknown := sorted(set(c) - set(CLAIM_KEYS)):
            raise SpecError(f"{at}.{unknown[0]}", "one of " + ", ".join(CLAIM_KEYS), unknown[0])
        if "coherency_grows" in c:
            if other := sorted(set(c) & {"best", "worst", "of", "workload", "concurrency"}):
                raise SpecError(f"{at}.{other[0]}", "no order keys beside coherency_grows", other[0])
            workloads = _strings(c["coherency_grows"], f"{at}.coherency_grows")
            if len(workloads) < 2:
                raise SpecError(f"{at}.coherency_grows", "two or more workloads, in the order kappa grows", list(workloads))
            text = c.get("text", f"coherency grows along {', '.join(workloads)}")
            if not isinstance(text, str):
                raise SpecError(f"{at}.text", "a string", text)
            out.append(CoherencyClaim(text, workloads, _needs(c.get("needs", {}), f"{at}.needs")))
            continue
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
        out.append(Claim(text, kind, c[kind], tuple(rivals), workloads, tuple(concs), _needs(c.get("needs", {}), f"{at}.needs")))
    return out


def _needs(value: object, at: str) -> Needs:
    """A claim's ``needs`` table, every key checked."""
    if not isinstance(value, dict):
        raise SpecError(at, "a table such as {cpus = 4, saturated = true, effect = 0.2}", value)
    if unknown := sorted(set(value) - set(NEEDS_KEYS)):
        raise SpecError(f"{at}.{unknown[0]}", "one of " + ", ".join(NEEDS_KEYS), unknown[0])
    cpus = value.get("cpus")
    if cpus is not None and (not isinstance(cpus, int) or isinstance(cpus, bool) or cpus < 1):
        raise SpecError(f"{at}.cpus", "a whole number >= 1", cpus)
    span = value.get("concurrency")
    if span is not None and not (isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in span)
                                 and 1 <= span[0] <= span[1]):
        raise SpecError(f"{at}.concurrency", "[LOW, HIGH] with 1 <= LOW <= HIGH", span)
    flags = {}
    for key in ("saturated", "quiet"):
        flag = value.get(key, False)
        if not isinstance(flag, bool):
            raise SpecError(f"{at}.{key}", "true or false", flag)
        flags[key] = flag
    effect = value.get("effect")
    if effect is not None and (isinstance(effect, bool) or not isinstance(effect, (int, float)) or not 0 < effect < 10):
        raise SpecError(f"{at}.effect", "a relative difference above 0, e.g. 0.2 for 20%", effect)
    return Needs(cpus=cpus, concurrency=(span[0], span[1]) if span is not None else None, saturated=flags["saturated"],
                 quiet=flags["quiet"], effect=float(effect) if effect is not None else None)


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


def report(claims: Sequence[Claim | CoherencyClaim], cells: Cells) -> list[str]:
    return [(check_coherency(c, cells) if isinstance(c, CoherencyClaim) else check(c, cells)).line() for c in claims]


def outcomes(claims: Iterable[Claim], cells: Cells) -> list[Outcome]:
    return [check(c, cells) for c in claims]
