"""PySpark connector: read Apogee topics as batch and streaming DataFrames, write DataFrames
into topics.

    from apogee.spark import local_session
    spark = local_session()                     # or: apogee.spark.register(existing_session)
    df = spark.read.format("apogee").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()

The format is also registered automatically in every session of an environment where
``apogee`` is installed (PySpark imports the top-level ``pyspark_apogee`` module).  Nothing
here imports pyspark until a Spark-facing name is used: importing ``apogee.spark`` stays
cheap, and ``import apogee`` never touches it.  See docs/spark.md.
"""

from __future__ import annotations

from typing import Any

from apogee.spark.errors import ApogeeSparkError, DataLossError, one_line

__all__ = [
    "ApogeeDataSource",
    "ApogeeSparkError",
    "DataLossError",
    "check_java",
    "check_workers_python",
    "local_session",
    "one_line",
    "register",
]

_LAZY = {
    "ApogeeDataSource": ("apogee.spark.datasource", "ApogeeDataSource"),
    "register": ("apogee.spark.session", "register"),
    "local_session": ("apogee.spark.session", "local_session"),
    "check_java": ("apogee.spark.session", "check_java"),
    "check_workers_python": ("apogee.spark.session", "check_workers_python"),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'apogee.spark' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value
