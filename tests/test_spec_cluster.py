"""The ``[cluster]`` section of a spec, without a cluster: it validates like every section (one
error naming ``cluster.KEY``, what it accepts, what it got), enters the spec hash only when
given, is read alone from spec text before the whole spec is, and :func:`choose` lets the
command-line flags win key by key while saying where each value came from."""

from __future__ import annotations

import pytest
from conftest import spec_text

from archlab.errors import InvalidValue, SpecError
from archlab.lab.engine import DataPlaneRegistry
from archlab.spec import SpecEnvironment, parse_spec
from archlab.spec.cluster import ClusterAddress, ClusterSettings, choose, settings_in


def parse(text: str):
    return parse_spec(text, "t.toml", SpecEnvironment(DataPlaneRegistry(), frozenset({0, 1})))


def test_the_section_is_read_and_typed():
    e = parse(spec_text(cluster='address = "tcp://10.0.0.1:8786"\nshards = 2\nload_hosts = ["loadA", "loadB"]'))
    assert e.cluster == ClusterSettings(ClusterAddress("scheduler", scheduler="tcp://10.0.0.1:8786"), 2, ("loadA", "loadB"))
    assert parse(spec_text(cluster='address = "local:3"')).cluster == ClusterSettings(ClusterAddress("local", workers=3))


def test_a_spec_without_the_section_keeps_its_hash_and_one_with_it_does_not():
    plain = parse(spec_text())
    assert plain.cluster is None and "cluster" not in plain.to_dict()
    with_cluster = parse(spec_text(cluster='address = "local:2"'))
    # Everything but the section is the same spec: the hash differs by the section alone.
    assert {k: v for k, v in with_cluster.to_dict().items() if k != "cluster"} == plain.to_dict()
    assert with_cluster.to_dict()["cluster"] == {"address": "local:2"} and with_cluster.spec_hash() != plain.spec_hash()


@pytest.mark.parametrize(
    "body, field, mentions",
    [
        ('shards = 2', "cluster.address", "nothing"),
        ('address = "10.0.0.1:8786"', "cluster.address", "tcp://HOST:PORT"),
        ('address = "local:0"', "cluster.address", "local:N"),
        ('address = "tcp://h:99999"', "cluster.address", "tcp://HOST:PORT"),
        ('address = 8786', "cluster.address", "tcp://HOST:PORT"),
        ('address = "local:2"\nshards = 0', "cluster.shards", "1..=1024"),
        ('address = "local:2"\nshards = true', "cluster.shards", "1..=1024"),
        ('address = "local:2"\nload_hosts = []', "cluster.load_hosts", "non-empty list"),
        ('address = "local:2"\nload_hosts = ["a", ""]', "cluster.load_hosts[1]", "worker name"),
        ('address = "local:2"\nload_hosts = ["a", "a"]', "cluster.load_hosts[1]", "listed twice"),
        ('address = "local:2"\nshards = 3\nload_hosts = ["a", "b"]', "cluster.shards", "at most the 2 load host(s)"),
        ('address = "local:2"\nworkers = 2', "cluster.workers", "a key one of address, shards, load_hosts, server_host"),
        ('address = "local:2"\nserver_host = ""', "cluster.server_host", "Dask worker name"),
    ],
)
def test_bad_cluster_input_names_the_key(body, field, mentions):
    with pytest.raises(SpecError) as e:
        parse(spec_text(cluster=body))
    assert e.value.field == field and mentions in str(e.value) and "\n" not in str(e.value)


def test_the_section_is_read_alone_from_spec_text():
    assert settings_in(spec_text()) is None
    assert settings_in(spec_text(cluster='address = "local:2"\nshards = 1')) == ClusterSettings(ClusterAddress("local", workers=2), 1)
    with pytest.raises(SpecError, match="cluster.shards"):
        settings_in(spec_text(cluster='address = "local:2"\nshards = -1'))


def test_the_flags_win_key_by_key_and_say_so():
    spec = ClusterSettings(ClusterAddress.parse("tcp://10.0.0.1:8786"), 2, ("a", "b", "c"))
    assert choose(None, None, None) is None
    c = choose(None, None, spec)
    assert (str(c.address), c.address_from, c.shards, c.shards_from, c.load_hosts) == (
        "tcp://10.0.0.1:8786", "[cluster] address", 2, "[cluster] shards", ("a", "b", "c"))
    c = choose("local:2", 3, spec)
    assert (str(c.address), c.address_from, c.shards, c.shards_from) == ("local:2", "--cluster", 3, "--shards")
    c = choose("local:2", None, None)
    assert (c.shards, c.shards_from, c.load_hosts) == (None, "one per load worker", None)
    assert choose("local:2", None, None).to_dict()["address_from"] == "--cluster"


def test_impossible_choices_are_refused_naming_the_flag():
    with pytest.raises(SpecError, match=r"^--shards: expected --shards only with --cluster or a spec with a \[cluster\] section, got 2$"):
        choose(None, 2, None)
    with pytest.raises(InvalidValue, match=r"^--cluster: expected tcp://HOST:PORT"):
        choose("localhost:8786", None, None)
    with pytest.raises(SpecError, match=r"^--shards: expected an integer in 1\.\.=1024"):
        choose("local:2", 0, None)
    with pytest.raises(SpecError, match=r"^--shards: expected at most the 1 load host\(s\) of the spec's cluster.load_hosts, got 2$"):
        choose(None, 2, ClusterSettings(ClusterAddress.parse("local:2"), None, ("a",)))


def test_a_server_host_is_refused_where_it_cannot_apply():
    e = parse(spec_text(cluster='address = "local:2"\nserver_host = "sut"'))
    assert e.cluster is not None and e.cluster.server_host == "sut" and e.to_dict()["cluster"]["server_host"] == "sut"
    db = spec_text(cluster='address = "local:2"\nserver_host = "sut"',
                   factors='architecture = ["blocking"]\nworkload = ["/echo?size=1", "/call?ms=1"]\nconcurrency = [1]')
    with pytest.raises(SpecError, match=r"^cluster.server_host: expected workloads that need no service of this host .*, got '/call\?ms=1'$"):
        parse(db)
