"""Apogee: a RocketMQ-compatible message queue in Python.

Importing ``apogee`` stays cheap: Spark workers import ``apogee.spark`` on every task.
"""

__version__ = "0.1.0"
