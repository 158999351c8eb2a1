"""The fit-usl and model verbs, driven through an argparse parser as the lead will wire them."""

from __future__ import annotations

import argparse

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
