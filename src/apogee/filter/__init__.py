"""Subscription filters: TAG expressions and RocketMQ's SQL92 property selectors."""

from apogee.filter.errors import FilterExpressionError
from apogee.filter.message_filter import SQL92, TAG, SqlMessageFilter, compile_filter, record_properties_text
from apogee.filter.sql92 import CompiledSql92, compile_sql92
from apogee.filter.tag import TagExpression, parse_tag_expression

__all__ = [
    "SQL92",
    "TAG",
    "CompiledSql92",
    "FilterExpressionError",
    "SqlMessageFilter",
    "TagExpression",
    "compile_filter",
    "compile_sql92",
    "parse_tag_expression",
    "record_properties_text",
]
