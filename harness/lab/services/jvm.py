"""Launching the vendored Kafka JVMs: where the jars are, the java command, log4j config.

The jars come from Maven Central through scripts/jars/pom.xml (scripts/bootstrap):
`vendor/kafka/libs` is the broker's and Connect worker's classpath, and
`vendor/kafka/plugins` is Connect's plugin.path (one folder per connector plugin).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from driftlab.harness.lab.services.base import ServiceError

REPO_ROOT = Path(__file__).resolve().parents[3]
VENDOR_ENV = "DRIFTLAB_KAFKA_VENDOR"

# A small heap and the serial collector keep several JVMs affordable on a 2-core
# machine; C1 only (TieredStopAtLevel=1) halves start-up CPU, and the lab never needs
# the broker's peak throughput.
DEFAULT_JVM_OPTS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
)

# Everything to stdout, which the supervised process appends to the service's log file.
# The request logger and the clients' config dumps are silenced: they drown the log
# in lines nobody reads during a fault experiment.
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.clients.consumer.ConsumerConfig=WARN
log4j.logger.org.apache.kafka.clients.producer.ProducerConfig=WARN
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
log4j.logger.org.apache.kafka.common.utils.AppInfoParser=WARN
log4j.logger.org.reflections=ERROR
log4j.logger.org.eclipse.jetty=WARN
"""


def vendor_dir() -> Path:
    """The vendored Kafka folder ($DRIFTLAB_KAFKA_VENDOR or <repo>/vendor/kafka)."""
    return Path(os.environ.get(VENDOR_ENV) or REPO_ROOT / "vendor" / "kafka")


def libs_dir() -> Path:
    """The broker and Connect classpath folder, checked to hold the Kafka jars."""
    libs = vendor_dir() / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")) or not any(libs.glob("connect-runtime-*.jar")):
        raise ServiceError(
            f"the Kafka jars are missing from {libs}; run scripts/bootstrap "
            "(it fetches them with Maven from scripts/jars/pom.xml)"
        )
    return libs


def plugins_dir() -> Path:
    """Connect's plugin.path, checked to hold the Debezium PostgreSQL connector."""
    plugins = vendor_dir() / "plugins"
    if not any(plugins.glob("debezium-connector-postgres/debezium-connector-postgres-*.jar")):
        raise ServiceError(
            f"the Debezium PostgreSQL connector is missing from {plugins}; run scripts/bootstrap"
        )
    return plugins


def java_binary() -> str:
    """The java executable ($JAVA_HOME/bin/java, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ServiceError("java not found: apt-get install openjdk-17-jre-headless")
    return found


def write_log4j(path: Path) -> Path:
    """Write the log4j 1.x (reload4j) configuration the JVMs log with."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(LOG4J_PROPERTIES)
    return path


def _escape(text: str, key: bool) -> str:
    """`text` as java.util.Properties reads it back: backslashes, line breaks and
    non-ASCII characters escaped (a user's connector config may hold a regex), and in
    a key the separators `=`, `:` and spaces."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
        elif (key and ch in "=: ") or (ch in "#!" and i == 0) or (ch == " " and i == 0):
            out.append("\\" + ch)
        elif ord(ch) > 0x7E:
            out.append("".join(f"\\u{u:04x}" for u in _utf16(ch)))
        else:
            out.append(ch)
    return "".join(out)


def _utf16(ch: str) -> list[int]:
    raw = ch.encode("utf-16-be")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def write_properties(path: Path, props: Mapping[str, object]) -> Path:
    """Write a Java .properties file, every key and value escaped as Properties.load
    reads it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{_escape(str(key), True)}={_escape(str(value), False)}" for key, value in props.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


class JavaRuntime(Protocol):
    """What a JVM's command line needs of a runtime (runtime.Runtime has it; runtime.py
    imports this module, so this one names only the two methods it calls)."""

    def java(self) -> str:
        """The java executable."""
        ...

    def kafka_libs(self) -> Path:
        """The Kafka broker and Connect classpath folder."""
        ...


def java_argv(
    main_class: str,
    args: Sequence[str | Path],
    *,
    heap: str,
    log4j: Path,
    tmp_dir: Path,
    runtime: JavaRuntime,
) -> list[str]:
    """The command line of one JVM on the runtime's Kafka classpath."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    return [
        runtime.java(),
        f"-Xmx{heap}",
        *DEFAULT_JVM_OPTS,
        f"-Djava.io.tmpdir={tmp_dir}",
        f"-Dlog4j.configuration={log4j.as_uri()}",
        "-cp",
        f"{runtime.kafka_libs()}/*",
        main_class,
        *(str(a) for a in args),
    ]
