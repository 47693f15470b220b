"""A session whose Python workers cannot import apogee is told so in one line at registration,
instead of failing deep inside a job with ``No module named 'apogee'`` (issue 17 §8)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from apogee.spark import ApogeeSparkError, register


def test_register_says_what_to_set_when_workers_run_another_python(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real interpreter without apogee: this one without its site-packages.
    wrong = tmp_path / "python-without-apogee"
    wrong.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    wrong.chmod(0o755)
    # What PYSPARK_PYTHON=<wrong> gives a session: the interpreter its workers are started with.
    monkeypatch.setattr(spark.sparkContext, "pythonExec", str(wrong))
    with pytest.raises(ApogeeSparkError) as info:
        register(spark)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"apogee: Spark's Python workers run `{wrong}`, which cannot import apogee")
    assert "No module named 'apogee'" in message
    assert "PYSPARK_PYTHON" in message and "spark.pyspark.python" in message and sys.executable in message
