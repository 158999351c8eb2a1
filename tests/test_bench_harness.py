"""The benchmark harness's statistics and bookkeeping (bench/harness.py): what a table of ratios
says must follow from its repetitions, the order of contenders must rotate, CPU time must come
from the kernel's accounting and results must be valid JSON."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import harness  # noqa: E402


def test_median_ratio_is_the_median_of_per_pair_ratios_not_a_ratio_of_medians():
    # Per-pair ratios 1, 1, 20 have median 1; the medians 4 and 2 have ratio 2.
    a, b = [1.0, 4.0, 40.0], [1.0, 4.0, 2.0]
    interval = harness.median_ratio_interval(a, b)
    assert interval.median == 1.0
    assert statistics.median(a) / statistics.median(b) != interval.median


def test_bootstrap_interval_brackets_the_median_and_is_reproducible():
    numerators = [1.9, 2.1, 2.0, 2.3, 1.7, 2.2, 2.05, 1.95, 2.4, 1.8]
    denominators = [1.0] * 10
    first = harness.median_ratio_interval(numerators, denominators)
    again = harness.median_ratio_interval(numerators, denominators)
    assert (first.low, first.high) == (again.low, again.high)
    assert min(numerators) <= first.low <= first.median <= first.high <= max(numerators)
    # Another seed draws other resamples: the interval may move, never past the data.
    other = harness.median_ratio_interval(numerators, denominators, seed=1)
    assert min(numerators) <= other.low <= other.high <= max(numerators)


def test_identical_ratios_give_a_point_interval_and_a_target_is_met_only_when_cleared():
    interval = harness.median_ratio_interval([3.0] * 5, [1.0] * 5)
    assert (interval.low, interval.median, interval.high) == (3.0, 3.0, 3.0)
    assert interval.clears(3.0) and not interval.clears(3.01)
    wide = harness.Interval(median=1.2, low=0.9, high=1.5)
    assert not wide.clears(1.0), "a median above the target with an interval reaching below it is not met"


def test_unequal_or_empty_pairs_are_refused_with_their_lengths():
    with pytest.raises(ValueError, match="got 2 and 1"):
        harness.median_ratio_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="got 0 and 0"):
        harness.median_ratio_interval([], [])


def test_alternation_rotates_the_order_and_warms_every_contender_up_once():
    calls: list[str] = []

    def contender(name):
        return harness.Contender(name, lambda: calls.append(name) or harness.Sample(1.0),
                                 warmup=lambda: calls.append(f"warm-{name}"))

    result = harness.alternate([contender("a"), contender("b"), contender("c")], 3, progress=False)
    assert calls[:3] == ["warm-a", "warm-b", "warm-c"]
    rounds = [calls[3 + 3 * i: 6 + 3 * i] for i in range(3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert all(len(result.samples[n]) == 3 for n in "abc")


def test_ratio_orientation_for_rates_and_times():
    result = harness.Alternation(["archlab", "peer"], {
        "archlab": [harness.Sample(10.0), harness.Sample(12.0), harness.Sample(8.0)],
        "peer": [harness.Sample(5.0), harness.Sample(6.0), harness.Sample(4.0)]})
    assert result.ratio("archlab", "peer", higher_is_better=True).median == 2.0
    assert result.ratio("archlab", "peer", higher_is_better=False).median == 0.5


def test_process_cpu_time_comes_from_proc_stat_of_that_process():
    # A child that spins for a bounded amount of its own CPU time, then waits on stdin: its
    # utime + stime must cover what it spun, and the reading must be of the child, not of us.
    spin = ("import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
            "print('spun', flush=True)\nsys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", spin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "spun"
        # /proc accounts in clock ticks: allow one tick of rounding each for utime and stime.
        assert harness.process_cpu_s(child.pid) >= 0.3 - 2 / harness.CLOCK_TICKS
        # The split adds up to the total; a user-space spin is checked in the next test.
        split = harness.process_cpu(child.pid)
        assert split.total == pytest.approx(harness.process_cpu_s(child.pid), abs=2 / harness.CLOCK_TICKS)
    finally:
        child.stdin.close()
        child.wait(10)
    assert harness.process_cpu_s(os.getpid()) == pytest.approx(harness.self_cpu_s(), abs=0.05)


def test_children_cpu_is_split_into_user_and_kernel_time():
    # Two waited-for children, each bounded by its own account (os.times()): one spends 0.2 s of
    # system time (the kernel fills 1 MiB from /dev/zero per call), the other 0.2 s of user time
    # (arithmetic, reading its clock once per 10^5 steps). Each shows up on its own side.
    kernel = ("import os\nf = open('/dev/zero', 'rb', buffering=0)\nbuf = bytearray(1 << 20)\n"
              "while os.times().system < 0.2: f.readinto(buf)\n")
    user = ("import os\nx = 0\nwhile os.times().user < 0.2:\n    for i in range(100_000): x += i\n")
    spent = {}
    for name, code in (("kernel", kernel), ("user", user)):
        before = harness.children_cpu()
        subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
        spent[name] = harness.children_cpu() - before
    assert spent["kernel"].system >= 0.2 - 0.02 and spent["kernel"].system > spent["kernel"].user
    assert spent["user"].user >= 0.2 - 0.02 and spent["user"].user > spent["user"].system
    assert harness.children_cpu_s() == pytest.approx(harness.children_cpu().total)


def test_results_are_valid_json_with_machine_facts(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    facts = harness.machine_facts({"peer": "1.0"})
    assert facts["cores"] == os.cpu_count() and facts["kernel"] and facts["tools"] == {"peer": "1.0"}
    path = harness.write_results("demo", [{"ratio": harness.Interval(2.0, 1.5, 2.5), "cpu": float("nan")}],
                                 facts, {"reps": 3})
    document = json.loads(path.read_text())  # strict: NaN would not parse back as JSON null
    assert document["table"][0] == {"ratio": {"median": 2.0, "low": 1.5, "high": 2.5, "confidence": 0.95},
                                    "cpu": None}
    assert document["machine"]["tools"] == {"peer": "1.0"}
    # The run is also kept under its time, so that the next one does not erase it.
    kept = list((tmp_path / "history").glob("demo-*.json"))
    assert len(kept) == 1 and kept[0].read_text() == path.read_text()
    assert kept[0].name == f"demo-{document['measured_at'].replace('-', '').replace(':', '')}.json"


def test_option_types_refuse_bad_values_in_one_line_naming_the_allowed_ones():
    import argparse

    parser = argparse.ArgumentParser(prog="bench", exit_on_error=False)
    parser.add_argument("--reps", type=harness.count(), default=20)
    parser.add_argument("--cpu", type=harness.count(0), default=0)
    parser.add_argument("--duration", type=harness.number(), default=1.0)
    parser.add_argument("--warmup", type=harness.number(zero_allowed=True), default=1.0)
    ok = parser.parse_args(["--reps", "3", "--cpu", "0", "--duration", "0.5", "--warmup", "0"])
    assert (ok.reps, ok.cpu, ok.duration, ok.warmup) == (3, 0, 0.5, 0.0)
    for argv, message in [
        (["--reps", "0"], "argument --reps: expected an integer >= 1, got '0'"),
        (["--reps", "2.5"], "argument --reps: expected an integer >= 1, got '2.5'"),
        (["--cpu", "-1"], "argument --cpu: expected an integer >= 0, got '-1'"),
        (["--duration", "0"], "argument --duration: expected a finite number > 0, got '0'"),
        (["--duration", "nan"], "argument --duration: expected a finite number > 0, got 'nan'"),
        (["--warmup", "inf"], "argument --warmup: expected a finite number >= 0, got 'inf'"),
        (["--warmup", "-1"], "argument --warmup: expected a finite number >= 0, got '-1'"),
    ]:
        with pytest.raises(argparse.ArgumentError) as refused:
            parser.parse_args(argv)
        assert str(refused.value) == message


def test_a_bench_ends_in_one_line_on_ctrl_c_and_on_a_failing_peer(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["demo.py"])

    def interrupted() -> int:
        raise KeyboardInterrupt

    def peer_fails() -> int:
        subprocess.run([sys.executable, "-c", "import sys; sys.exit('wrk: cannot connect')"], capture_output=True,
                       text=True, check=True)
        return 0

    def server_silent() -> int:
        raise RuntimeError("no answer from http://127.0.0.1:1/ within 10 s")

    for main, status, line in [
        (interrupted, 130, "demo.py: interrupted; no results written"),
        (peer_fails, 1, "exited with status 1: wrk: cannot connect"),
        (server_silent, 1, "demo.py: no answer from http://127.0.0.1:1/ within 10 s"),
        (lambda: 0, 0, None),
    ]:
        with pytest.raises(SystemExit) as ended:
            harness.run_main(main)
        assert ended.value.code == status
        err = capsys.readouterr().err
        if line is None:
            assert err == ""
        else:
            assert len(err.splitlines()) == 1 and line in err, err
