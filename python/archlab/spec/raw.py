"""Stage one of spec validation: TOML text -> :class:`RawSpec`, whose shape is checked (known
sections, known keys, tables where tables belong) but whose values are still untyped. Keeping
the shape check apart means stage two (:mod:`archlab.spec.validate`) can read every key without
guarding against typos, and a typo is reported with the list of keys that would have been right."""

from __future__ import annotations

import difflib
import functools
import re
import tomllib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from archlab import contract
from archlab.errors import SpecError
from archlab.spec.model import DB_KEYS, FACTOR_NAMES, LOAD_KEYS, server_option_names
from archlab.spec import cluster, network
from archlab.spec.systems import SYSTEM_KEYS
from archlab.spec.tune import TUNE_KEYS

# Sections written as arrays of tables ([[systems]]): section -> keys each entry accepts.
ARRAY_SECTIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({"systems": SYSTEM_KEYS})


@functools.cache
def sections() -> Mapping[str, tuple[str, ...]]:
    """Section -> keys it accepts; the one place that lists the spec's vocabulary. The keys of
    ``[server]`` are the data plane's server options (read once, when a spec is first parsed)."""
    return MappingProxyType(
        {
            "experiment": ("name", "description", "repetitions", "warmup", "duration", "max_foreign"),
            "factors": FACTOR_NAMES,
            "server": server_option_names(),
            "load": LOAD_KEYS,
            "placement": ("server_cpus", "client_cpus"),
            "db": DB_KEYS,
            network.SECTION: network.keys(),
            "tune": TUNE_KEYS,
            cluster.SECTION: cluster.KEYS,
        }
    )


REQUIRED_SECTIONS = ("experiment", "factors")


@dataclass(frozen=True)
class RawSpec:
    source: str
    tables: Mapping[str, Mapping[str, object]]
    arrays: Mapping[str, tuple[Mapping[str, object], ...]] = field(default_factory=lambda: MappingProxyType({}))

    def entries(self, name: str) -> tuple[Mapping[str, object], ...]:
        """The entries of an array-of-tables section (``[[systems]]``); none if left out."""
        return self.arrays.get(name, ())

    def section(self, name: str) -> Mapping[str, object]:
        """The section's table; an empty one if the spec leaves it out."""
        return self.tables.get(name, MappingProxyType({}))


def _one_of(names: tuple[str, ...] | list[str]) -> str:
    return "one of " + ", ".join(names)


def parse_toml(text: str, source: str = "<spec>") -> RawSpec:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise toml_error(text, source, e) from None
    known = sections()
    arrays = {name: _entries(doc.pop(name), name, keys) for name, keys in ARRAY_SECTIONS.items() if name in doc}
    for section, table in doc.items():
        if section not in known:
            raise SpecError(section, f"a section {_one_of([*known, *ARRAY_SECTIONS])}", f"[{section}]")
        if not isinstance(table, dict):
            raise SpecError(section, "a table ([" + section + "] followed by keys)", table)
        for key in table:
            if key not in known[section]:
                raise SpecError(f"{section}.{key}", f"a key {_one_of(known[section])}", key, hint=_suggestion(section, key, known[section]))
    for section in REQUIRED_SECTIONS:
        if section not in doc:
            raise SpecError(section, f"a [{section}] section", "nothing")
    tables = {name: MappingProxyType(dict(table)) for name, table in doc.items()}
    return RawSpec(source=source, tables=MappingProxyType(tables), arrays=MappingProxyType(arrays))


def _entries(value: object, section: str, keys: tuple[str, ...]) -> tuple[Mapping[str, object], ...]:
    """An array of tables, each entry's keys checked like a section's."""
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise SpecError(section, f"an array of tables ([[{section}]] followed by keys)", value)
    for i, entry in enumerate(value):
        for key in entry:
            if key not in keys:
                raise SpecError(f"{section}[{i}].{key}", f"a key {_one_of(keys)}", key)
    return tuple(MappingProxyType(dict(e)) for e in value)


def _suggestion(section: str, key: str, keys: tuple[str, ...]) -> str:
    """The key meant, for a typo; for a server option with what the data plane says it is."""
    close = difflib.get_close_matches(key, keys, n=1)
    if not close:
        return ""
    if section == "server":
        return f"did you mean {close[0]!r}: {contract.server_option(close[0]).doc}"
    return f"did you mean {close[0]!r}?"


def toml_error(text: str, source: str, error: tomllib.TOMLDecodeError) -> SpecError:
    """A TOML syntax error as a :class:`SpecError` quoting the line it points at."""
    line = _offending_line(text, str(error))
    if len(line) > 80:  # a one-line answer quotes the start of a long line, not all of it
        line = line[:80] + "..."
    return SpecError(source, "valid TOML", line, hint=str(error))


_LINE_RE = re.compile(r"at line (\d+)")


def _offending_line(text: str, message: str) -> str:
    """The source line a TOML error points at (tomllib only puts its number in the message)."""
    m = _LINE_RE.search(message)
    lines = text.splitlines()
    if m and 1 <= int(m.group(1)) <= len(lines):
        return lines[int(m.group(1)) - 1].strip()
    return message
