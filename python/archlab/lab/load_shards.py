"""How one cell's load is cut into shards: the ``archlab-engine load`` command of the cell (as
:meth:`archlab.lab.engine.Engine.load_argv` spells it) becomes S commands whose users
(``--connections`` of the closed model), arrival rate (``--rate``) or session rate
(``--session-rate``) add up exactly to the cell's, each with its own seed. Nothing here runs
anything: the plan is pure data, so the split can be checked without a cluster.

Integers are divided with the remainder going to the first shards (10 users over 3 shards:
4, 3, 3); rates are divided evenly (a sum of S Poisson streams of rate R/S is a Poisson stream
of rate R; constant arrivals become S interleaved constant streams). The seed of shard k is a
SplitMix64 mix of the cell's seed and k, so a shard's schedule is reproducible from the cell's
seed alone and no two shards (nor shard k of repetition r and shard k' of repetition r+1,
whose cell seeds differ by one) draw the same stream."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from archlab.errors import InvalidValue

# Flags whose value is a count of users or connections, split as integers.
_INTEGER_FLAGS = ("--connections", "--max-connections")
# Flags whose value is a rate, split evenly.
_RATE_FLAGS = ("--rate", "--session-rate")
# Files a shard writes (or reads: its parameters) on its own host.
OUTPUT_FLAGS = ("--json", "--hdr-log", "--records", "--params")
_MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One step of SplitMix64 (Steele, Lea and Flood 2014; the seeding of ``crates/prng``)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def shard_seed(cell_seed: int, shard: int) -> int:
    """The seed of shard ``shard`` (0-based) of a cell whose unsharded seed is ``cell_seed``;
    kept below 2^63 so every consumer of the seed reads it as a non-negative integer."""
    return splitmix64((cell_seed & _MASK64) ^ splitmix64(shard + 1)) >> 1


def split_integer(total: int, shards: int) -> list[int]:
    """``total`` over ``shards`` parts differing by at most one, the larger first."""
    base, extra = divmod(total, shards)
    return [base + (1 if k < extra else 0) for k in range(shards)]


def _format_rate(value: Fraction) -> str:
    """A rate as the engine parses it: plain decimal, never an exponent."""
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value))


@dataclass(frozen=True)
class ShardPlan:
    """One shard of a cell: its index, its command (output paths still the cell's: the shard
    replaces them on its host), its parameters when the command reads them from a file
    (``load --params``: the shard writes them on its host) and what it was given."""

    index: int
    argv: tuple[str, ...]
    users: int | None
    rate_per_s: float | None
    seed: int | None
    params: dict | None = None


# The keys of ``load --params`` (the data plane's contract) that a split divides.
_INTEGER_KEYS = ("connections", "max_connections")
_RATE_KEYS = ("rate", "session_rate")


def split_params(argv: list[str] | tuple[str, ...], params: dict, shards: int) -> list[ShardPlan]:
    """As :func:`split_load`, for a command that reads its parameters from a JSON file
    (``load --params FILE``): ``params`` is that file's object, divided the same way."""
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise InvalidValue("--shards", "an integer >= 1", shards)
    closed = params.get("model", "closed") == "closed"
    parts: dict[str, list] = {}
    users: list[int] | None = None
    for key in _INTEGER_KEYS:
        if isinstance(params.get(key), int):
            counts = split_integer(params[key], shards)
            if key == "connections" and closed:
                if params[key] < shards:
                    raise InvalidValue("--shards", f"at most the cell's {params[key]} closed-model users (each shard needs one)", shards)
                users = counts
            if key == "max_connections":
                counts = [max(1, c) for c in counts]
            parts[key] = counts
    rates: list[float] | None = None
    for key in _RATE_KEYS:
        if isinstance(params.get(key), (int, float)) and not isinstance(params.get(key), bool):
            share = float(Fraction(params[key]) / shards)
            parts[key] = [share] * shards
            rates = [share] * shards
    plans = []
    for k in range(shards):
        own = {**params, **{key: values[k] for key, values in parts.items()}}
        seed = shard_seed(int(params["seed"]), k) if isinstance(params.get("seed"), int) else None
        if seed is not None:
            own["seed"] = seed
        plans.append(ShardPlan(k, tuple(argv), users[k] if users else None, rates[k] if rates else None, seed, own))
    return plans


def _value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def split_load(argv: list[str] | tuple[str, ...], shards: int) -> list[ShardPlan]:
    """The ``shards`` commands whose load adds up to ``argv``'s. Refuses a split that would
    leave a shard without users (fewer closed-model users than shards)."""
    argv = list(argv)
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise InvalidValue("--shards", "an integer >= 1", shards)
    closed = "--model" not in argv
    parts: dict[str, list[str]] = {}
    users: list[int] | None = None
    for flag in _INTEGER_FLAGS:
        text = _value(argv, flag)
        if text is None:
            continue
        total = int(text)
        counts = split_integer(total, shards)
        if flag == "--connections" and closed:
            if total < shards:
                raise InvalidValue("--shards", f"at most the cell's {total} closed-model users (each shard needs one)", shards)
            users = counts
        if flag == "--max-connections":
            counts = [max(1, c) for c in counts]  # the engine needs room for one connection
        parts[flag] = [str(c) for c in counts]
    rates: list[float] | None = None
    for flag in _RATE_FLAGS:
        text = _value(argv, flag)
        if text is not None:
            share = Fraction(text) / shards
            parts[flag] = [_format_rate(share)] * shards
            rates = [float(share)] * shards
    seed_text = _value(argv, "--seed")
    plans = []
    for k in range(shards):
        out = list(argv)
        for flag, values in parts.items():
            out[out.index(flag) + 1] = values[k]
        seed = None
        if seed_text is not None:
            seed = shard_seed(int(seed_text), k)
            out[out.index("--seed") + 1] = str(seed)
        plans.append(ShardPlan(k, tuple(out), users[k] if users else None, rates[k] if rates else None, seed))
    return plans


def with_outputs(argv: tuple[str, ...] | list[str], engine: str, outputs: dict[str, str]) -> list[str]:
    """``argv`` run by ``engine`` (the binary on the shard's host) writing its files to
    ``outputs`` (flag -> path on that host); an output flag not in ``outputs`` is dropped."""
    out = [engine]
    rest = list(argv[1:])
    i = 0
    while i < len(rest):
        flag = rest[i]
        if flag in OUTPUT_FLAGS:
            if flag in outputs:
                out += [flag, outputs[flag]]
            i += 2
            continue
        out.append(flag)
        i += 1
    return out
