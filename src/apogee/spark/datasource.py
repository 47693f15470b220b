"""``ApogeeDataSource``: the Spark data source named ``apogee``.

Spark pickles this object to its Python workers and calls ``reader`` / ``streamReader`` /
``writer`` / ``streamWriter`` there; options are parsed (and checked) in those calls, on the
``CaseInsensitiveDict`` Spark hands over, never on a plain-dict copy.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from apogee.spark.options import parse_sink_options, parse_source_options
from apogee.spark.schema import SOURCE_DDL

_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def _in_pushdown_worker() -> bool:
    """True inside Spark's filter-pushdown planner worker.

    Spark fails the whole read (DATA_SOURCE_PUSHDOWN_DISABLED) when a reader implements
    ``pushFilters`` while ``spark.sql.python.filterPushdown.enabled`` is false, and it only
    runs this worker when the flag is true.  So the reader with ``pushFilters`` is handed out
    here only, and the plain reader everywhere else: reads work with the flag on or off.
    """
    if _PUSHDOWN_WORKER in sys.modules:
        return True
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == _PUSHDOWN_WORKER


class ApogeeDataSource(DataSource):
    """Read Apogee (RocketMQ) topics as DataFrames and write DataFrames into topics.

    ``spark.read.format("apogee").option("namesrv", "127.0.0.1:9876").option("topic", "T").load()``
    """

    @classmethod
    def name(cls) -> str:
        # Spark asks for the name when the class is registered: on the driver (where a
        # session is active) that is the moment to check that its workers can import us.
        from apogee.spark.session import check_workers_python

        check_workers_python()
        return "apogee"

    def schema(self) -> str:
        return SOURCE_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        from apogee.spark.reader import ApogeePushdownReader, ApogeeReader, check_schema

        opts = parse_source_options(self.options, streaming=False)
        check_schema(schema)
        cls = ApogeePushdownReader if _in_pushdown_worker() else ApogeeReader
        return cls(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from apogee.spark.reader import check_schema
        from apogee.spark.stream_reader import ApogeeStreamReader

        opts = parse_source_options(self.options, streaming=True)
        check_schema(schema)
        return ApogeeStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        from apogee.spark.writer import ApogeeWriter, check_sink_schema

        opts = parse_sink_options(self.options, streaming=False)
        check_sink_schema(schema, opts)
        return ApogeeWriter(opts, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from apogee.spark.writer import ApogeeStreamWriter, check_sink_schema

        opts = parse_sink_options(self.options, streaming=True)
        check_sink_schema(schema, opts)
        return ApogeeStreamWriter(opts, schema)
