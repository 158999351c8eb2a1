"""Program parsing through the server's parser, and feature extraction on hand-written programs
whose features are counted by hand in the comments."""

import pytest

from archlab.errors import InvalidValue
from archlab.tuning import Features, StepCosts, StepKind, extract, load_programs, parse_programs

# http_1_loop_db_grpc: written calls: 1 call (top), 1 db + 1 call in the outer loop, 2 fanouts
# of widths 3 and 2 (5 gRPC calls), one of them in the inner loop.
PROGRAMS = """
[programs.http_1_loop_db_grpc]
steps = [
  { step = "call", ms = 5 },
  { step = "repeat", times = 3, steps = [
      { step = "db", id = 7 },
      { step = "call", ms = 2 },
      { step = "repeat", times = 2, steps = [{ step = "fanout", ms = [1, 4, 2] }] },
  ] },
  { step = "fanout", ms = [10, 3] },
  { step = "prime", n = 1000 },
  { step = "sleep", ms = 4 },
]

[programs.db_2]
steps = [{ step = "db", id = 1 }, { step = "db", id = 2 }]
"""

COSTS = StepCosts(prime_s_per_n=1e-6, sort_s_per_element_level=0.0, db_s=0.5e-3, call_overhead_s=0.0)


def test_hand_counted_features():
    progs = parse_programs(PROGRAMS, "p.toml")
    f = extract(progs["http_1_loop_db_grpc"], COSTS)
    # Seed's six: written calls; loops containing each kind (the outer loop contains all three
    # kinds through its inner loop; the inner loop only gRPC).
    assert (f.http_calls, f.db_calls, f.grpc_calls) == (2, 1, 5)
    assert (f.loops_with_http, f.loops_with_db, f.loops_with_grpc) == (1, 1, 2)
    # Executed per request: http 1 + 3x1 = 4; db 3x1 = 3; gRPC 3x2x3 + 2 = 20.
    assert (f.http_calls_executed, f.db_calls_executed, f.grpc_calls_executed) == (4, 3, 20)
    assert f.max_fanout == 3
    # Waits: 5 ms + 3 x 2 ms + 3 x 2 x max(1,4,2) ms + max(10,3) ms = 5 + 6 + 24 + 10 = 45 ms.
    assert f.wait_s == pytest.approx(0.045)
    assert f.db_s == pytest.approx(3 * 0.5e-3)
    assert f.cpu_s == pytest.approx(1000 * 1e-6)
    assert f.sleep_s == pytest.approx(0.004)
    assert f.demands.total_s == pytest.approx(0.045 + 0.0015 + 0.001 + 0.004)
    assert len(f.vector(seed_only=True)) == 6 and Features.names(seed_only=True)[0] == "http_calls"

    d = extract(progs["db_2"], COSTS)
    assert (d.http_calls, d.db_calls, d.grpc_calls, d.loops_with_db) == (0, 2, 0, 0)


def test_the_tree_is_the_servers_tree():
    p = parse_programs(PROGRAMS, "p.toml")["http_1_loop_db_grpc"]
    assert [s.kind for s in p.steps] == [StepKind.CALL, StepKind.REPEAT, StepKind.FANOUT, StepKind.PRIME, StepKind.SLEEP]
    loop = p.steps[1]
    assert loop.times == 3 and loop.steps[0].row_id == 7 and loop.steps[2].steps[0].ms == (1, 4, 2)


def test_refusals_name_file_and_field(tmp_path):
    with pytest.raises(InvalidValue) as e:
        parse_programs('programs.p.steps = [{ step = "loop", times = 2 }]', "bad.toml")
    assert str(e.value).startswith("bad.toml: programs.p.steps[0].step: expected one of prime, sort, db, call")
    path = tmp_path / "p.toml"
    path.write_text('programs.p.steps = [{ step = "repeat", steps = [{ step = "db", id = 1 }] }]')
    with pytest.raises(InvalidValue, match=r"programs\.p\.steps\[0\]\.times: expected an integer in 1\.\.=1000"):
        load_programs(path)
    with pytest.raises(InvalidValue, match="StepCosts.db_s"):
        StepCosts(db_s=-1)
