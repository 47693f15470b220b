"""Automatic registration of the ``apogee`` Spark data source.

PySpark (4.0+) looks for Python data sources in installed packages by importing every
top-level module whose name starts with ``pyspark_`` and registering its ``DefaultSource``
under ``DefaultSource.name()`` (``pyspark/sql/worker/lookup_data_sources.py``); there is no
entry point for this.  Installing ``apogee`` therefore makes ``spark.read.format("apogee")``
work in every session, classic or Spark Connect, without a ``register`` call.
"""

from apogee.spark.datasource import ApogeeDataSource as DefaultSource

__all__ = ["DefaultSource"]
