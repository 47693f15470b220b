"""Getting a Spark session that can use the connector: Java and worker-Python checks,
registration, local session."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from apogee.spark.errors import ApogeeSparkError

MIN_JAVA = 17
JAVA_HINT = "install a Java 17+ runtime (e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java")


def java_major(version_text: str) -> int | None:
    """The major version in ``java -version`` output (``1.8.0_392`` is 8, ``17.0.15`` is 17)."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


@functools.lru_cache(maxsize=1)
def check_java() -> str:
    """The ``java`` Spark will use, or ``ApogeeSparkError`` with one line saying what is missing."""
    java = find_java()
    if java is None:
        raise ApogeeSparkError(
            f"Spark needs Java {MIN_JAVA}+, but no `java` was found on PATH or in JAVA_HOME: {JAVA_HINT}"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApogeeSparkError(
            f"Spark needs Java {MIN_JAVA}+, but `{java} -version` failed ({exc}): {JAVA_HINT}"
        ) from None
    major = java_major(out.stderr + out.stdout)
    if major is None:
        raise ApogeeSparkError(f"Spark needs Java {MIN_JAVA}+, but `{java} -version` printed no version: {JAVA_HINT}")
    if major < MIN_JAVA:
        raise ApogeeSparkError(f"Spark needs Java {MIN_JAVA}+, but {java} is Java {major}: {JAVA_HINT}")
    return java


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@functools.lru_cache(maxsize=8)
def _check_python_imports_apogee(python: str) -> None:
    """Run ``python -c 'import apogee'``; ``ApogeeSparkError`` in one line when it cannot.

    Cached per interpreter (a success only: a failure is checked again once fixed).
    """
    resolved = shutil.which(python) or python
    if _same_file(resolved, sys.executable):
        return  # this interpreter, which holds apogee
    fix = (
        f"set PYSPARK_PYTHON (before the session starts) or spark.pyspark.python to {sys.executable}, "
        "or install apogee for that interpreter"
    )
    try:
        out = subprocess.run([resolved, "-c", "import apogee"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApogeeSparkError(
            f"Spark's Python workers run `{python}`, which cannot be started ({exc}): {fix}"
        ) from None
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        why = lines[-1] if lines else f"exit status {out.returncode}"
        raise ApogeeSparkError(f"Spark's Python workers run `{python}`, which cannot import apogee ({why}): {fix}")


def check_workers_python(spark: Any = None) -> None:
    """Fail in one line, before any job, when the Python that Spark starts for its workers
    (``PYSPARK_PYTHON`` when the session started, else ``python3``) cannot import ``apogee``:
    Spark unpickles the data source there, and would fail deep inside a job with
    ``No module named 'apogee'``.

    ``spark`` defaults to the active session.  Checked for local masters only, where the
    workers run on this machine; on a cluster (or over Spark Connect) the executors' Python
    is not this machine's to run.
    """
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context if spark is None else spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext on the client
        return
    if sc is None or not str(sc.master).startswith("local"):
        return
    _check_python_imports_apogee(str(sc.pythonExec))


def register(spark: Any) -> None:
    """Register the ``apogee`` format on ``spark`` (classic or Spark Connect) and turn on
    Python filter pushdown so batch reads narrow queues, offsets and times at the broker.

    Raises ``ApogeeSparkError`` when the session's Python workers cannot import ``apogee``
    (``check_workers_python``)."""
    from apogee.spark.datasource import ApogeeDataSource

    check_workers_python(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(ApogeeDataSource)


def local_session(
    app_name: str = "apogee", *, cores: int = 2, memory: str = "1g", log_file: str | None = None, **conf: str
) -> Any:
    """A local SparkSession sized for a small machine, with the connector registered.

    Python workers run this interpreter (so they import the same ``apogee``); the UI is off;
    shuffles use ``cores`` partitions; Spark binds to loopback.  ``log_file`` receives the
    JVM's own output (log4j, warnings) instead of the terminal.  Extra Spark settings:
    ``local_session(**{"spark.sql.x": "v"})``.
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {
        "spark.master": f"local[{cores}]",
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.driver.memory": memory,
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.sql.streaming.stopTimeout": "30s",
        "spark.python.worker.idleTimeoutSeconds": "300",
        **conf,
    }
    if log_file is not None and SparkContext._gateway is None:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
        with open(log_file, "ab") as log:  # noqa: PTH123 - the JVM keeps its own descriptor
            gateway = launch_gateway(  # type: ignore[no-untyped-call]
                spark_conf, popen_kwargs={"stdout": log, "stderr": log}
            )
        SparkContext._ensure_initialized(gateway=gateway)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def main() -> int:
    """``python -m apogee.spark.session``: check the Java runtime (``make demo`` runs it)."""
    try:
        java = check_java()
    except ApogeeSparkError as exc:
        print(str(exc).removeprefix("apogee: "), file=sys.stderr)
        return 1
    print(f"Java OK: {java}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
