"""RocketMQ's SQL92 message selectors: parse, check, compile (see ``parser`` for the design)."""

from apogee.filter.sql92.compiler import CompiledSql92, compile_sql92
from apogee.filter.sql92.evaluate import evaluate
from apogee.filter.sql92.javatypes import EvalError
from apogee.filter.sql92.parser import MAX_DEPTH, MAX_EXPRESSION_LENGTH, parse

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "CompiledSql92",
    "EvalError",
    "compile_sql92",
    "evaluate",
    "parse",
]
