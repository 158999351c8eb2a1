"""The fit-usl and model verbs, driven through an argparse parser as the lead will wire them."""

from __future__ import annotations

import argparse
import re

import pytest

from archlab.models import ModelError, UnidentifiableError
from archlab.models.cli import add_arguments, run


def parse(argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser.add_subparsers())
    return parser.parse_args(argv)


def test_fit_usl_from_csv(tmp_path, capsys):
    # R usl's specsdm91 data (notes/modeling.md §1.3); R reports alpha 0.0277285.
    csv = tmp_path / "specsdm91.csv"
    csv.write_text("N,X\n1,64.9\n18,995.9\n36,1652.4\n72,1853.2\n108,1828.9\n144,1775.0\n216,1702.2\n")
    assert run(parse(["fit-usl", str(csv), "--predict", "96"])) == 0
    out = capsys.readouterr().out
    assert "0.0277285" in out and "N* = 96.5" in out and "prediction band" in out
    # Amdahl vs USL on the same points (tests/models/test_models_usl_weighting.py).
    assert "Amdahl vs USL: F = 15.1" in out and "preferred: USL" in out
    assert run(parse(["fit-usl", str(csv), "--weighting", "relative"])) == 0
    assert "(relative)" in capsys.readouterr().out


def test_fit_usl_refusals(tmp_path):
    csv = tmp_path / "few.csv"
    csv.write_text("clients,tput\n1,10\n2,19\n4,30\n")
    with pytest.raises(ModelError, match="columns 'N' and 'X'"):
        run(parse(["fit-usl", str(csv)]))
    with pytest.raises(UnidentifiableError, match="at least 4 distinct"):
        run(parse(["fit-usl", str(csv), "--n-column", "clients", "--x-column", "tput"]))


def test_model_mmm_prints_the_table(capsys):
    assert run(parse(["model", "mmm", "--arrival-rate", "6854", "--service-rate", "877.67656", "--servers", "8"])) == 0
    out = capsys.readouterr().out
    assert "M/M/8" in out and "Prob. of queueing" in out
    with pytest.raises(ModelError, match="^--population"):
        run(parse(["model", "repairman", "--service-rate", "10"]))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"N,X\n1,100\n2\n4,300\n", r"^{csv}:3: expected a row of 2 fields \(as the header line\), got 1$"),
        (b"N,X\n1,100\n2,190,7\n", r"^{csv}:3: expected a row of 2 fields \(as the header line\), got 3$"),
        (b"N,X\n1,100\n2,\xff\xfe\n", r"^{csv}: expected a UTF-8 text CSV file, got 'byte 0xff at offset 12'$"),
        (b"N,X\n1," + b"7" * 200_000 + b"\n", r"^{csv}:2: expected a CSV row, got 'field larger than field limit"),
        (b"N,X\n1,100\n2,nan\n", r"^{csv}:3: expected a finite number in column 'X', got 'nan'$"),
        (b"N,X\n1,100\nmany,200\n", r"^{csv}:3: expected a finite number in column 'N', got 'many'$"),
        (b"", r"^{csv}: expected a header line naming the columns 'N' and 'X', got \[\]$"),
    ],
    ids=["short-row", "long-row", "non-utf8", "200kB-field", "nan", "text", "empty"],
)
def test_fit_usl_names_the_file_and_line_of_a_bad_row(tmp_path, content, message):
    # Before: a TypeError (short row), UnicodeDecodeError, csv.Error or a fit on NaN.
    csv = tmp_path / "points.csv"
    csv.write_bytes(content)
    with pytest.raises(ModelError, match=message.format(csv=re.escape(str(csv)))):
        run(parse(["fit-usl", str(csv)]))


def test_refusals_name_the_flags_not_the_library_parameters(tmp_path):
    with pytest.raises(ModelError, match=r"^--service-rate: expected a finite number > 0, got -1.0$"):
        run(parse(["model", "mm1", "--arrival-rate", "1", "--service-rate", "-1"]))
    with pytest.raises(ModelError, match=r"^--time-scale: expected a finite number > 0, got nan$"):
        run(parse(["model", "mm1", "--arrival-rate", "1", "--service-rate", "2", "--time-scale", "nan"]))
    csv = tmp_path / "p.csv"
    csv.write_text("N,X\n1,64.9\n18,995.9\n36,1652.4\n72,1853.2\n108,1828.9\n")
    with pytest.raises(ModelError, match=r"^--confidence: expected a number in \(0, 1\), got 2.0$"):
        run(parse(["fit-usl", str(csv), "--confidence", "2"]))
    with pytest.raises(ModelError, match=r"^--predict: expected concurrency levels >= 1, got -4.0$"):
        run(parse(["fit-usl", str(csv), "--predict", "-4"]))
    csv.write_text("N,X\n0,64.9\n18,995.9\n36,1652.4\n72,1853.2\n108,1828.9\n")
    with pytest.raises(ModelError, match=rf"^{re.escape(str(csv))}: column N: expected concurrency levels >= 1, got 0.0$"):
        run(parse(["fit-usl", str(csv)]))


@pytest.mark.parametrize(("kind", "flag"), [("repairman", "--population"), ("mmm", "--servers"), ("mmmb", "--capacity")])
def test_exact_models_bound_their_state_space(kind, flag):
    # Before: --population 10^8 ran for minutes; --servers 10^8 took 6 GB of memory.
    argv = ["model", kind, "--service-rate", "1", "--arrival-rate", "0.5", "--population", "10", "--capacity", "10"]
    argv += [flag, str(10**8)]
    with pytest.raises(ModelError, match=rf"^{flag}: expected an integer in 1..=1_000_000, got 100000000 "):
        run(parse(argv))
