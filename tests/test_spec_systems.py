"""``[[systems]]`` in specs: a system is a level of the architecture factor; everything that
cannot work is refused before anything starts, naming the field, the allowed values and the
value received (unknown placeholders, CPUs this machine lacks, two systems on one fixed port,
a ``system:`` level naming no system, a target that is not an http URL)."""

from __future__ import annotations

import pytest
from conftest import spec_text

from archlab.errors import SpecError
from archlab.spec import parse_spec
from archlab.spec.systems import column_sources

SVC = """
[[systems]]
name = "svc"
command = "python3 server.py --port {port} --host {host} --cpus {cpus} --dir {dir}"
"""
FACTORS = 'architecture = ["netty", "system:svc"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'


def parse(env, systems: str = SVC, factors: str = FACTORS):
    return parse_spec(spec_text(factors=factors) + systems, "spec.toml", env)


def refusal(env, systems: str = SVC, factors: str = FACTORS) -> SpecError:
    with pytest.raises(SpecError) as e:
        parse(env, systems, factors)
    return e.value


def test_a_system_is_an_architecture_level(env):
    exp = parse(env)
    (svc,) = exp.systems
    assert svc.command == ("python3", "server.py", "--port", "{port}", "--host", "{host}", "--cpus", "{cpus}", "--dir", "{dir}")
    assert (svc.ready, svc.stop_signal, svc.stop_grace_s, svc.reusable, svc.port) == ("port", "SIGTERM", 3.0, False, None)
    assert [c.cell_id for c in exp.cells()] == ["netty__echo-size-64__c2", "system-svc__echo-size-64__c2"]
    assert exp.to_dict()["systems"][0]["name"] == "svc"
    # Its columns are marked as measured from outside, the socket calls as unavailable.
    assert column_sources("system:svc", exp.systems)["syscalls"].startswith("unavailable")
    assert column_sources("netty", exp.systems)["cpu"].startswith("server itself")


def test_a_spec_of_systems_only_takes_any_path_as_workload(env):
    exp = parse(env, factors='architecture = ["system:svc"]\nworkload = ["/index.html"]\nconcurrency = [1]')
    assert exp.cells()[0].workload == "/index.html"


def test_every_key_is_read(env):
    exp = parse(
        env,
        systems="""
[[systems]]
name = "web"
command = ["nginx", "-c", "{dir}/nginx.conf"]
port = 18080
cpus = "1"
env = { MODE = "fast" }
ready = "http"
ready_path = "/health"
ready_timeout = "2s"
stop_signal = "SIGQUIT"
stop_grace = "500ms"
setup = ["cp conf {dir}/nginx.conf"]
teardown = [["rm", "-f", "{dir}/nginx.conf"]]
reusable = true
""",
        factors='architecture = ["system:web"]\nworkload = ["/"]\nconcurrency = [1]',
    )
    (web,) = exp.systems
    assert (web.port, web.cpus, web.env, web.ready, web.ready_path) == (18080, (1,), (("MODE", "fast"),), "http", "/health")
    assert (web.ready_timeout_s, web.stop_signal, web.stop_grace_s, web.reusable) == (2.0, "SIGQUIT", 0.5, True)
    assert web.setup == (("cp", "conf", "{dir}/nginx.conf"),) and web.teardown == (("rm", "-f", "{dir}/nginx.conf"),)


def test_unknown_placeholder_is_refused(env):
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "server --port {prot}"\n')
    assert e.field == "systems[0].command" and "{port}" in e.allowed and "{prot}" in e.hint and "did you mean {port}" in e.hint


def test_cpus_beyond_the_machine_are_refused(env):
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "server {port}"\ncpus = "0-3"\n')
    assert e.field == "systems[0].cpus" and e.allowed == "CPUs that exist here (0-1)" and e.received == "0-3"


def test_two_systems_on_one_fixed_port_are_refused(env):
    systems = '[[systems]]\nname = "a"\ncommand = "a"\nport = 8080\n[[systems]]\nname = "b"\ncommand = "b"\nport = 8080\n'
    e = refusal(env, systems=systems, factors='architecture = ["system:a", "system:b"]\nworkload = ["/"]\nconcurrency = [1]')
    assert e.field == "systems[1].port" and e.received == 8080 and "systems[0] (a)" in e.hint


def test_a_level_naming_no_system_is_refused(env):
    e = refusal(env, factors='architecture = ["netty", "system:svx"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]')
    assert e.field == "factors.architecture[1]" and "system:svc" in e.allowed and e.received == "system:svx"
    assert "did you mean 'system:svc'" in e.hint


def test_command_and_target_exclude_each_other(env):
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "x"\ntarget = "http://127.0.0.1:80/"\n')
    assert e.field == "systems[0]" and e.received == "command and target"
    e = refusal(env, systems='[[systems]]\nname = "svc"\ntarget = "https://example.org/"\n')
    assert e.field == "systems[0].target" and "http://HOST:PORT" in e.allowed
    e = refusal(env, systems='[[systems]]\nname = "svc"\ntarget = "http://127.0.0.1:81"\nport = 81\n')
    assert e.field == "systems[0].port"


def test_remote_target_parses_host_port_and_base_path(env):
    exp = parse(env, systems='[[systems]]\nname = "svc"\ntarget = "http://127.0.0.1:8123/api/"\n')
    t = exp.systems[0].target
    assert (t.host, t.port, t.base_path) == ("127.0.0.1", 8123, "/api")
    assert column_sources("system:svc", exp.systems)["cpu"] == "unavailable (remote target)"


def test_unknown_key_and_bad_values_are_named(env):
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "x"\nready_timout = "1s"\n')
    assert e.field == "systems[0].ready_timout" and "ready_timeout" in e.allowed
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "x"\nstop_signal = "SIGSTOP"\n')
    assert e.field == "systems[0].stop_signal" and "SIGTERM" in e.allowed
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = []\n')
    assert e.field == "systems[0].command"
    e = refusal(env, systems='[systems]\nname = "svc"\n')
    assert e.field == "systems" and "[[systems]]" in e.allowed


def test_server_settings_are_refused_when_no_cell_runs_an_archlab_server(env):
    only = 'architecture = ["system:svc"]\nworkload = ["/"]\nconcurrency = [1]'
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors=only, server="threads = 4") + SVC, "spec.toml", env)
    assert e.value.field == "server.threads" and "no [server] options" in e.value.allowed
    with pytest.raises(SpecError) as e:
        parse_spec(spec_text(factors=only + "\nthreads = [2, 4]") + SVC, "spec.toml", env)
    assert e.value.field == "factors.threads"
    # With an archlab architecture beside it, [server] applies to that one.
    assert parse_spec(spec_text(factors=FACTORS.replace("netty", "blocking"), server="threads = 4") + SVC, "spec.toml", env).server.threads == 4


def test_a_preset_fills_readiness_and_stop_and_excludes_a_command(env):
    exp = parse(env, systems='[[systems]]\nname = "svc"\npreset = "nginx"\nstop_grace = "1s"\n')
    (svc,) = exp.systems
    assert (svc.preset, svc.command, svc.ready, svc.ready_path, svc.stop_signal) == ("nginx", None, "http", "/", "SIGQUIT")
    e = refusal(env, systems='[[systems]]\nname = "svc"\npreset = "apache"\n')
    assert e.field == "systems[0].preset" and "'nginx'" in e.allowed and e.received == "apache"
    e = refusal(env, systems='[[systems]]\nname = "svc"\npreset = "nginx"\ncommand = "nginx"\n')
    assert e.field == "systems[0]" and e.received == "command and preset"


def test_a_system_no_cell_runs_is_refused(env):
    e = refusal(env, factors='architecture = ["netty"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]')
    assert e.field == "systems[0]" and "'system:svc'" in e.allowed and e.received == "svc"


DB_SYSTEM = """
[[systems]]
name = "svc"
command = "java -jar svc.jar --port {port} --jdbc {db_jdbc}"
env = { DATABASE_URL = "{db_url}", PGPASSWORD = "{db_password}", GREETING = "{{literal}}" }
"""


def test_a_system_naming_the_lab_database_is_accepted_and_says_so(env):
    exp = parse(env, DB_SYSTEM, 'architecture = ["system:svc"]\nworkload = ["/users/42"]\nconcurrency = [2]')
    (svc,) = exp.systems
    assert svc.uses_database
    assert not parse(env).systems[0].uses_database  # {port} and the like are not the database
    # [db] configures the database of such a system, though no workload is /db.
    exp = parse(env, DB_SYSTEM + '\n[db]\nrows = 500\ncpus = "0"\nsettings = { work_mem = "8MB" }\n',
                'architecture = ["system:svc"]\nworkload = ["/users/42"]\nconcurrency = [2]')  # fmt: skip
    assert (exp.db.rows, exp.db.cpus, exp.db.settings) == (500, (0,), (("work_mem", "8MB"),))


def test_a_database_placeholder_is_named_where_it_is_wrong(env):
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "svc --db {db_urll}"\n')
    assert e.field == "systems[0].command" and "{db_url}" in e.allowed and "did you mean {db_url}" in e.hint
    e = refusal(env, systems='[[systems]]\nname = "svc"\ncommand = "svc"\nenv = { DATABASE_URL = "{database}" }\n')
    assert e.field == "systems[0].env.DATABASE_URL" and "unknown placeholder {database}" in e.hint


def test_the_servers_pool_settings_are_refused_for_a_database_only_systems_use(env):
    e = refusal(env, DB_SYSTEM + "\n[db]\npool = 4\n", 'architecture = ["system:svc"]\nworkload = ["/users/42"]\nconcurrency = [2]')
    assert e.field == "db.pool" and "no cell runs an archlab architecture" in e.allowed


def test_a_topology_backend_naming_the_database_is_refused_before_anything_starts(env):
    topology = DB_SYSTEM + '\n[[systems]]\nname = "lb"\nbackends = { system = "svc", copies = 2 }\nfront = { proxy = "round-robin" }\n'
    e = refusal(env, topology, 'architecture = ["system:lb"]\nworkload = ["/users/42"]\nconcurrency = [2]')
    assert e.field == "systems[1].backends.system" and "get no database" in e.allowed and "{db_*}" in e.hint


def test_a_worker_places_a_system_and_enters_the_hash_only_when_given(env):
    placed = parse(env, SVC + 'worker = "sut"\n')
    assert placed.systems[0].worker == "sut" and placed.to_dict()["systems"][0]["worker"] == "sut"
    plain = parse(env)
    assert plain.systems[0].worker is None and "worker" not in plain.to_dict()["systems"][0]
    assert placed.spec_hash() != plain.spec_hash()
    e = refusal(env, SVC + "worker = 3\n")
    assert e.field == "systems[0].worker" and "Dask worker" in e.allowed and e.received == 3
    e = refusal(env, DB_SYSTEM + 'worker = "sut"\n', 'architecture = ["system:svc"]\nworkload = ["/users/42"]\nconcurrency = [2]')
    assert e.field == "systems[0].worker" and "names the lab database" in e.allowed and "[db] worker" in e.hint
    # With the database placed too, its placeholders name that worker's address: accepted.
    both = parse(env, DB_SYSTEM + 'worker = "sut"\n[db]\nworker = "db"\n', 'architecture = ["system:svc"]\nworkload = ["/users/42"]\nconcurrency = [2]')
    assert both.systems[0].worker == "sut" and both.db_settings.worker == "db"
    topology = SVC + 'worker = "sut"\n[[systems]]\nname = "lb"\nbackends = { system = "svc", copies = 2 }\nfront = { proxy = "round-robin" }\n'
    e = refusal(env, topology, 'architecture = ["system:lb"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]')
    assert e.field == "systems[1].backends.system" and "run on this host" in e.allowed


def test_a_topologys_peer_backends_may_be_placed_on_a_worker(env):
    factors = 'architecture = ["system:mc"]\nworkload = ["/memcached?ratio=0:1"]\nconcurrency = [2]'
    mc = '[[systems]]\nname = "mc"\nbackends = {{ preset = "memcached", copies = 2{extra} }}\nfront = {{ middleware = "seed" }}\n' \
         'load = {{ protocol = "memcached" }}\n'
    placed = parse(env, mc.format(extra=', worker = "cache"'), factors)
    plain = parse(env, mc.format(extra=""), factors)
    assert placed.systems[0].topology.backends.worker == "cache" and plain.systems[0].topology.backends.worker is None
    assert "worker" not in plain.to_dict()["systems"][0]["backends"] and placed.spec_hash() != plain.spec_hash()
    e = refusal(env, mc.format(extra=', worker = "cache", cpu_quota = 0.5'), factors)
    assert e.field == "systems[0].backends.cpu_quota" and "on a worker" in e.allowed


def test_archlabs_own_backends_and_a_front_may_be_placed_on_a_worker(env):
    factors = 'architecture = ["system:lb"]\nworkload = ["/echo?size=64"]\nconcurrency = [2]'
    lb = '[[systems]]\nname = "lb"\nbackends = {{ architecture = "netty", copies = 2{b} }}\nfront = {{ proxy = "round-robin"{f} }}\n'
    placed = parse(env, lb.format(b=', worker = "w"', f=', worker = "v"'), factors)
    plain = parse(env, lb.format(b="", f=""), factors)
    t = placed.systems[0].topology
    assert (t.backends.worker, t.front.worker) == ("w", "v") and plain.systems[0].topology.front.worker is None
    assert placed.to_dict()["systems"][0]["front"]["worker"] == "v" and "worker" not in plain.to_dict()["systems"][0]["front"]
    assert placed.spec_hash() != plain.spec_hash()
    assert [(f, w) for f, _, w in placed.placed_workers()] == [("systems[0].backends.worker", "w"), ("systems[0].front.worker", "v")]
    e = refusal(env, lb.format(b="", f=', worker = "v", cpu_quota = 0.5'), factors)
    assert e.field == "systems[0].front.cpu_quota" and "fronts on a worker" in e.allowed
    e = refusal(env, lb.format(b="", f=", worker = 3"), factors)
    assert e.field == "systems[0].front.worker" and e.received == 3
