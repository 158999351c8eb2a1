"""Regenerate the tool-produced fixtures in this folder (run by hand, not by pytest):

* ``wrk_latency.txt``: ``wrk --latency`` (wrk 4.1.0, Debian) for 1 s against a Python
  ``http.server`` on 127.0.0.1, port 0.
* ``jmeter213_default.jtl`` and ``jmeter213_connect.jtl``: real JMeter 2.13 (Debian ``jmeter`` +
  ``jmeter-http``) CSV results against the same server, 2 threads x 100 loops of two samplers
  ("GET /, with comma" -> 200, "GET /missing" -> 404); the second adds IdleTime and Connect.

* ``jmeter213_noheader.jtl``, ``jmeter213_xml.jtl``, ``jmeter213_killed.jtl`` and
  ``jmeter213_killed_xml.jtl``: ``jmeter -n -t jmeter/plan.jmx`` (the same two samplers, 2 threads
  x 50 loops) with JMeter 2.13's default CSV output (no header line: its jmeter.properties has
  ``print_field_names=false``), with ``output_format=xml``, and the last two from a run of 2 x
  100,000 loops killed with SIGKILL once its output passed 16 KiB (JMeter writes through an 8 KiB
  buffer, so the file ends inside a row). Debian's JMeter 2.13 loads a plan only with XStream
  1.4.7 ahead of Debian's newer one on the classpath (``mvn dependency:get
  -Dartifact=com.thoughtworks.xstream:xstream:1.4.7`` puts it under ~/.m2) and with Java 17's
  ``--add-opens`` for the classes XStream reflects on.
* ``hdrh_us.hgrm``: HdrHistogram's percentile distribution (Python ``hdrh``,
  ``output_percentile_distribution`` with ``output_value_unit_scaling_ratio`` 1000) of 2,000
  log-normal values recorded in ns, so printed in us; ``hdrh_us.values`` holds the recorded values.

Usage: ``python tests/latency/data/regenerate.py`` (needs wrk, javac and JMeter installed). Traffic
goes to loopback only. The HdrHistogram interval-log and memtier fixtures are built inside the tests.
"""

from __future__ import annotations

import glob
import http.server
import io
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

HERE = Path(__file__).resolve().parent
JMETER_CLASSPATH = ":".join(sorted(glob.glob("/usr/share/jmeter/lib/ext/*.jar") + glob.glob("/usr/share/jmeter/lib/*.jar")
                                   + glob.glob("/usr/share/java/*.jar")))


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the console readable
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        wrk = subprocess.run(["wrk", "-t1", "-c4", "-d1s", "--latency", url], check=True, capture_output=True, text=True)
        (HERE / "wrk_latency.txt").write_text(wrk.stdout)
        with tempfile.TemporaryDirectory() as build:
            subprocess.run(["javac", "-d", build, "-cp", JMETER_CLASSPATH, str(HERE / "jmeter" / "Fixture.java")], check=True)
            port = str(server.server_address[1])
            for name, extra in (("jmeter213_default.jtl", []),
                                ("jmeter213_connect.jtl", ["jmeter.save.saveservice.connect_time=true",
                                                           "jmeter.save.saveservice.idle_time=true"])):
                output = HERE / name
                output.unlink(missing_ok=True)
                subprocess.run(["java", "-cp", f"{JMETER_CLASSPATH}:{build}", "Fixture", port, str(output), "100", *extra],
                               check=True, capture_output=True)
        port = server.server_address[1]
        jmeter_n(port, 50, HERE / "jmeter213_noheader.jtl")
        jmeter_n(port, 50, HERE / "jmeter213_xml.jtl", "jmeter.save.saveservice.output_format=xml")
        jmeter_n(port, 100_000, HERE / "jmeter213_killed.jtl", kill_after_bytes=16 * 1024)
        jmeter_n(port, 100_000, HERE / "jmeter213_killed_xml.jtl", "jmeter.save.saveservice.output_format=xml",
                 kill_after_bytes=16 * 1024)
    finally:
        server.shutdown()
    write_hgrm()


XSTREAM_147 = Path.home() / ".m2/repository/com/thoughtworks/xstream/xstream/1.4.7/xstream-1.4.7.jar"
# What XStream 1.4.7 reflects on, closed by default since Java 17.
ADD_OPENS = [f"--add-opens={m}=ALL-UNNAMED" for m in (
    "java.base/java.util", "java.base/java.lang", "java.base/java.lang.reflect", "java.base/java.text",
    "java.base/java.io", "java.base/java.net", "java.desktop/java.awt", "java.desktop/java.awt.font")]


def jmeter_n(port: int, loops: int, output: Path, *properties: str, kill_after_bytes: int | None = None) -> None:
    """``jmeter -n -t jmeter/plan.jmx -l output`` (JMeter 2.13's own NewDriver) with ``-J`` properties."""
    if not XSTREAM_147.exists():
        raise SystemExit(f"{XSTREAM_147} is missing: mvn dependency:get -Dartifact=com.thoughtworks.xstream:xstream:1.4.7")
    output.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as work:
        command = ["java", *ADD_OPENS, "-cp", f"{XSTREAM_147}:/usr/share/jmeter/bin/ApacheJMeter.jar",
                   "-Djmeter.home=/usr/share/jmeter", "org.apache.jmeter.NewDriver", "-n", "-t", str(HERE / "jmeter" / "plan.jmx"),
                   "-l", str(output), "-j", os.path.join(work, "jmeter.log"), f"-Jport={port}", f"-Jloops={loops}",
                   "-Jjmeterengine.nongui.port=0",  # no shutdown listener on a fixed port
                   *(f"-J{p}" for p in properties)]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if kill_after_bytes is None:
            if process.wait(timeout=600) != 0:
                raise SystemExit(f"jmeter failed: {' '.join(command)}")
            return
        deadline = time.monotonic() + 300
        while not (output.exists() and output.stat().st_size > kill_after_bytes):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit("jmeter ended or stalled before the output reached the size to kill it at")
            time.sleep(0.05)  # a script, not a test: polling the file is how to see it grow
        process.send_signal(signal.SIGKILL)
        process.wait()


def write_hgrm() -> None:
    rng = np.random.default_rng(2013)
    values_ns = np.round(rng.lognormal(13.0, 0.6, 2000)).astype(np.int64)  # median about 440 us
    histogram = HdrHistogram(1, 60_000_000_000, 3)
    for value in values_ns:
        histogram.record_value(int(value))
    buffer = io.BytesIO()
    histogram.output_percentile_distribution(buffer, 1000)  # ns / 1000: printed in us
    (HERE / "hdrh_us.hgrm").write_bytes(buffer.getvalue())
    (HERE / "hdrh_us.values").write_text("".join(f"{v}\n" for v in values_ns))


if __name__ == "__main__":
    main()
