"""Request mixes and the generator's SO_RCVBUF in specs: the spec's ``mix`` and ``rcvbuf`` (in
[load] and as factors) are read by the data plane and refused against their TOML key, and a spec
with a mix factor runs end to end on loopback against the single-thread server: each class's
counts add up to the row's, the catalog's ``result_classes`` and the report's panel hold the
classes, the raw records carry each request's class, and the receive buffer reached the kernel."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest
from conftest import spec_text

from archlab.errors import SpecError
from archlab.lab.rawrecords import RecordsFile, export_parquet
from archlab.lab.session import run_spec
from archlab.report.html import render_html
from archlab.spec import parse_spec
from archlab.store import Store

LARGE, SMALL = 20_000, 16
MIX_2 = f"/echo?size={LARGE}:1,/echo?size={SMALL}:3"
MIX_0 = f"/echo?size={LARGE}:0,/echo?size={SMALL}:1"
SHORT = 'name = "mixes"\nrepetitions = 1\nwarmup = "200ms"\nduration = "1s"'


def factors(mix: str = f'["{MIX_2}", "{MIX_0}"]', extra: str = "") -> str:
    return f'architecture = ["single-thread"]\nmix = {mix}\nconcurrency = [2]\n{extra}'


def refused(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    return info.value


def test_a_mix_factor_gives_cells_with_the_mix_as_their_load():
    exp = parse_spec(spec_text(factors=factors(extra="rcvbuf = [4096, 102400]")))
    cells = exp.cells()
    assert [(c.mix, c.rcvbuf) for c in cells] == [(MIX_2, 4096), (MIX_2, 102400), (MIX_0, 4096), (MIX_0, 102400)]
    params = exp.load_params(cells[1])
    assert params["mix"] == MIX_2 and params["rcvbuf"] == 102400 and "path" not in params
    assert cells[0].probe_path == f"/echo?size={LARGE}"
    assert len({c.cell_id for c in cells}) == 4 and "mix-" in cells[0].cell_id and cells[1].cell_id.endswith("rcvbuf102400")
    # A mix in [load] holds for every cell; the list-of-tables form reads the same.
    tables = f'mix = [{{path = "/echo?size={LARGE}", weight = 1}}, {{path = "/echo?size={SMALL}", weight = 3}}]'
    exp = parse_spec(spec_text(factors='architecture = ["single-thread"]\nconcurrency = [1]', load=f'model = "closed"\n{tables}'))
    assert [c.mix for c in exp.cells()] == [MIX_2]


@pytest.mark.parametrize(
    "mix, key, allowed",
    [
        ('["/echo?size=1:1", "/a:-1,/b:2"]', "factors.mix[1]", "PATH:WEIGHT"),
        ('["/a:0,/b:0"]', "factors.mix[0]", "PATH:WEIGHT"),
        ('[""]', "factors.mix[0]", "PATH:WEIGHT"),
        ('["/echo?size=1:1", "/echo?size=1:1.0"]', "factors.mix[1]", "levels that differ"),
        ('["/nope:1"]', "factors.mix[0]", "in each class"),
        ('["/db?id=1:1,/echo?size=1:1"]', "factors.mix[0]", "need no lab service"),
    ],
)
def test_bad_mixes_are_refused_at_their_key(mix, key, allowed):
    e = refused(spec_text(factors=factors(mix)))
    assert e.field == key and allowed in str(e), str(e)
    assert "\n" not in str(e)


def test_a_mix_and_a_workload_or_two_mixes_are_refused():
    e = refused(spec_text(factors=factors(extra='workload = ["/echo?size=1"]')))
    assert e.field == "factors.workload" and "mix" in str(e)
    e = refused(spec_text(factors=factors(), load=f'model = "closed"\nmix = "{MIX_2}"'))
    assert e.field == "load.mix"
    # The data plane's bounds of the receive buffer, against the factor's level.
    e = refused(spec_text(factors=factors(extra="rcvbuf = [4096, 10]")))
    assert e.field == "factors.rcvbuf[1]" and "1024" in str(e), str(e)
    e = refused(spec_text(load='model = "closed"\nrcvbuf = "big"'))
    assert e.field == "load.rcvbuf"


def test_a_spec_with_a_mix_factor_runs_end_to_end(engine_path, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=SHORT, factors=factors(), load='model = "closed"\nrcvbuf = 65536\nrecords = true'))
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, stream=io.StringIO())
    view = store.load_run(handle.run_id)
    assert view.manifest.status == "complete" and [r.ok for r in view.rows] == [True, True], [r.error for r in view.rows]
    classes = store.catalog.classes(handle.run_id)
    assert len(classes) == 4
    for row in view.rows:
        summary = json.loads(Path(row.summary_path).read_text())
        mine = [c for c in classes if c["cell_id"] == row.cell_id]
        # The classes add up to the row, exactly.
        assert [c["path"] for c in mine] == [f"/echo?size={LARGE}", f"/echo?size={SMALL}"]
        assert sum(c["requests"] for c in mine) == row.measurement.requests == summary["requests"]
        assert sum(c["sent"] for c in mine) == summary["flow"]["sent"]
        assert sum(c["errors"] for c in mine) == row.measurement.errors == 0
        # Linux doubles SO_RCVBUF (socket(7)).
        assert summary["rcvbuf"] == {"requested_bytes": 65536, "applied_bytes": 131072}
        params = json.loads((Path(row.summary_path).parent / "load.params.json").read_text())
        assert params["rcvbuf"] == 65536 and params["mix"] in (MIX_2, MIX_0)
        # The raw records name each request's class; the weight-0 class is never drawn.
        records = Path(row.summary_path).parent / "records.bin"
        out = tmp_path / f"{row.cell_id}.parquet"
        export_parquet(RecordsFile.open(records), out)
        by_class = dict(duckdb.connect().execute("SELECT mix_class, count(*) FROM read_parquet(?) GROUP BY ALL", [str(out)]).fetchall())
        assert by_class == {i: c["responses"] for i, c in enumerate(mine) if c["responses"]}
        if params["mix"] == MIX_0:
            assert mine[0]["sent"] == 0 and set(by_class) == {1}
        else:
            assert mine[0]["sent"] > 0 and mine[1]["sent"] > 0
    page = render_html(view.manifest, view.rows, store.run_dir(handle.run_id))
    assert '<section id="classes"><h2>Request classes</h2>' in page
    assert page.count(f"<code>/echo?size={LARGE}</code>") == 2


def test_no_panel_without_a_mix(engine_path, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(experiment=SHORT, factors='architecture = ["single-thread"]\nworkload = ["/echo?size=16"]\nconcurrency = [1]'))
    store = Store(tmp_path / "runs")
    handle = run_spec(spec, store, stream=io.StringIO())
    view = store.load_run(handle.run_id)
    assert store.catalog.classes(handle.run_id) == []
    assert 'id="classes"' not in render_html(view.manifest, view.rows, store.run_dir(handle.run_id))


@pytest.mark.parametrize("mix", ["/a:0,/b:0", "/a:-1", "", "/a"])
def test_the_engine_refuses_a_bad_mix_naming_the_flag(engine_path, mix):
    import subprocess

    done = subprocess.run([str(engine_path), "load", "--target", "127.0.0.1:9", "--mix", mix], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    first = done.stderr.strip().splitlines()[0]
    assert "--mix" in first and "PATH:WEIGHT" in first, done.stderr


def test_shards_of_a_mixed_cell_merge_class_by_class(engine_path, tmp_path):
    """Two generators with the same mix (as `--cluster` shards a cell): the merged summary's
    classes are the sums of the shards' and still add up to the merged totals."""
    import subprocess

    from archlab.lab.load_merge import merge_shards
    from archlab.lab.processes import ProcessGroup

    docs, logs = [], []
    with ProcessGroup(3.0) as group:
        server = group.start("server", [str(engine_path), "serve", "--arch", "single-thread", "--host", "127.0.0.1", "--port", "0"],
                             tmp_path / "server.stderr")
        address = server.expect("listening ", 10.0).split(" ", 1)[1].strip()
        for k in range(2):
            argv = [str(engine_path), "load", "--target", address, "--mix", MIX_2, "--connections", "2", "--duration", "500ms",
                    "--warmup", "100ms", "--seed", str(100 + k), "--json", str(tmp_path / f"s{k}.json"), "--hdr-log", str(tmp_path / f"h{k}.log")]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            docs.append(json.loads((tmp_path / f"s{k}.json").read_text()))
            logs.append((tmp_path / f"h{k}.log").read_text())
        group.stop(server)
    merged = merge_shards(docs, logs, seed=100).summary
    for i, c in enumerate(merged["mix"]):
        for key in ("sent", "responses", "requests"):
            assert c[key] == sum(d["mix"][i][key] for d in docs), key
    for key, total in (("requests", merged["requests"]), ("responses", merged["responses"]), ("sent", merged["flow"]["sent"])):
        assert sum(c[key] for c in merged["mix"]) == total, key
