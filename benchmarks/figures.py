"""The docs' current figures, written from benchmark records, never typed (issue 23, item 4).

A benchmark run with ``--record NAME`` saves its medians, with the command, the commit, the
date and the load it ran under, as ``benchmarks/results/NAME.json``.  The peer harness in
``../shared/bench`` writes JSON lines of its own: ``peers_bench.py --record NAME`` keeps the
fields the tables use as ``benchmarks/results/NAME.jsonl``.  Each doc shows a record between two markers::

    <!-- figures: NAME -->
    ...written by this script...
    <!-- /figures: NAME -->

``figures.py`` (no arguments) rewrites every such block in README.md and docs/*.md from its
record; ``figures.py --check`` only reports blocks that differ, and the unit tests run that
check, so a figure typed into a block, or a record committed without its docs, fails the
suite.  The dated sections around the blocks are the history: what earlier runs measured,
with their commands.

    .venv/bin/python benchmarks/broker_cpu_bench.py --runs 5 --record broker-cpu
    .venv/bin/python benchmarks/peers_bench.py --python /tmp/vbench/bin/python --record peers-async
    .venv/bin/python benchmarks/figures.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

_BLOCK = re.compile(r"(<!-- figures: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /figures: (?P=name) -->)", re.S)

# The harness's fields a peers record keeps: what the tables below read, and where a row came from.
_PEER_FIELDS = (
    "system", "adapter", "workload", "rep", "noisy", "error", "msgs_per_s", "p50_us", "p99_us",
    "e2e_p50_us", "e2e_p99_us", "server_cpu_cores", "client_cpu_cores", "started",
)


# --- records --------------------------------------------------------------------------------


def measured_commit() -> str:
    """The short commit the run measured, marked ``+changes`` when the tree differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+changes" if git("status", "--porcelain", "--untracked-files=no", "src") else "")


def command_line() -> str:
    """How this process was started, as a user would type it from the repository's root."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = sys.argv[0]
    return shlex.join([".venv/bin/python", shown, *sys.argv[1:]])


def save_table(
    name: str,
    *,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    runs: int,
    loads: Iterable[float],
    notes: str = "",
) -> Path:
    """Save a benchmark's table of medians as the record ``name`` (rows of already formatted
    cells: the benchmark decides how a figure is shown, the docs only repeat it)."""
    load = list(loads)
    record = {
        "name": name, "kind": "table", "title": title, "command": command_line(), "commit": measured_commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"), "runs": runs,
        "cores": os.cpu_count(), "load": [round(min(load), 1), round(max(load), 1)] if load else None,
        "columns": list(columns), "rows": [[str(cell) for cell in row] for row in rows], "notes": notes,
    }
    return _write(RESULTS / f"{name}.json", json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def save_peers(
    name: str, paths: Sequence[Path], commands: Sequence[str], flush: str = "ASYNC_FLUSH", commit: str | None = None
) -> Path:
    """Keep the harness's result files ``paths`` (JSON lines, Apogee's and the peers' of one
    run, Apogee's broker under ``flush``) as the record ``name``, with the commands that made
    them (``commit``: the one Apogee ran from, when not the checkout's)."""
    rows = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows.append({k: row[k] for k in _PEER_FIELDS if k in row})
    if not rows:
        raise ValueError("no harness rows in " + ", ".join(map(str, paths)))
    meta = {"name": name, "kind": "peers", "flush": flush, "commit": commit or measured_commit(),
            "commands": list(commands), "date": datetime.datetime.fromtimestamp(min(r.get("started", 0) for r in rows),
                                                    datetime.UTC).strftime("%Y-%m-%d")}
    text = json.dumps(meta, ensure_ascii=False) + "\n" + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return _write(RESULTS / f"{name}.jsonl", text)


_NAME = re.compile(r"[\w.-]+")


def _write(path: Path, text: str) -> Path:
    if not _NAME.fullmatch(path.stem):
        raise ValueError(f"a record's name is letters, digits, '_', '.' and '-': {path.stem!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load(name: str, results: Path = RESULTS) -> dict[str, Any]:
    """The record ``name``: a table (.json) or a peers run (.jsonl: its meta line, then rows)."""
    table = results / f"{name}.json"
    if table.exists():
        return json.loads(table.read_text())  # type: ignore[no-any-return]
    lines = [json.loads(x) for x in (results / f"{name}.jsonl").read_text().splitlines() if x.strip()]
    return {**lines[0], "rows": lines[1:]}


# --- rendering (pure) ----------------------------------------------------------------------


def render(record: dict[str, Any]) -> str:
    """The Markdown a doc shows for ``record``."""
    if record["kind"] == "peers":
        return render_peers(record)
    return render_table(record)


def _markdown_table(columns: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def render_table(record: dict[str, Any]) -> str:
    load = record.get("load")
    where = f"{record['cores']} cores" + (f", load average {load[0]}-{load[1]}" if load else "")
    out = [f"{record['title']}: medians of {record['runs']} runs, {record['date']}, "
           f"commit {record['commit']}, {where}.", "", "```sh", record["command"], "```", ""]
    out += _markdown_table(record["columns"], record["rows"])
    if record.get("notes"):
        out += ["", record["notes"]]
    return "\n".join(out) + "\n"


def _spread(values: Sequence[float]) -> str:
    """Median [min-max], as the harness's own report writes them."""
    if not values:
        return ""
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def _values(rows: Sequence[dict[str, Any]], system: str, workload: str, key: str) -> list[float]:
    return [r[key] for r in rows
            if r["system"] == system and r["workload"] == workload and "error" not in r and r.get(key) is not None]


def _median(rows: Sequence[dict[str, Any]], system: str, workload: str, key: str) -> float | None:
    values = _values(rows, system, workload, key)
    return statistics.median(values) if values else None


# Issue 23's targets: (label, workload, field, Apogee must be >= factor x the best peer, or
# <= it when factor is negative: a latency), per durability.
_TARGETS = {
    "ASYNC_FLUSH": (
        ("W1 >= 1.1x, p99 no worse", "W1", "msgs_per_s", 1.1),
        ("W2 >= 1.2x", "W2", "msgs_per_s", 1.2),
        ("W3 >= 1.2x", "W3", "msgs_per_s", 1.2),
        ("W4 e2e p99 <= best", "W4", "e2e_p99_us", -1.0),
        ("W5 >= 1.2x", "W5", "msgs_per_s", 1.2),
    ),
    "SYNC_FLUSH": (
        ("W1 >= 1.3x, p99 no worse", "W1", "msgs_per_s", 1.3),
        ("W4 e2e p99 <= best", "W4", "e2e_p99_us", -1.0),
    ),
}


_BUSY_POLL = re.compile(r"apogee-busypoll(\d+)us-")


def apogee_label(commit: str, busy_poll_us: int) -> str:
    """The harness's system name for Apogee's rows of a run (``peers_bench``), which
    ``apogee_name`` reads back."""
    return f"apogee-{commit}" if busy_poll_us <= 0 else f"apogee-busypoll{busy_poll_us}us-{commit}"


def apogee_name(system: str) -> str:
    """How a table names one of Apogee's rows (``apogee_label`` made it)."""
    m = _BUSY_POLL.match(system)
    return f"Apogee, busy poll {m[1]} us" if m else "Apogee"


def targets(record: dict[str, Any]) -> list[tuple[str, str, str, float, bool]]:
    """(target, Apogee's median, the best peer's, ratio, met) for each target the record's
    workloads cover, per Apogee configuration of the run (the target's label names it when
    there are several).  The best peer is the one with the best median of the run."""
    rows = record["rows"]
    variants = list(dict.fromkeys(r["system"] for r in rows if r["adapter"] == "apogee"))
    out = []
    for apogee in variants:
        suffix = f" ({apogee_name(apogee)})" if len(variants) > 1 else ""
        out += [(label + suffix, *rest) for label, *rest in _targets_of(rows, apogee, record)]
    return out


def _targets_of(
    rows: Sequence[dict[str, Any]], apogee: str, record: dict[str, Any]
) -> list[tuple[str, str, str, float, bool]]:
    peers = sorted({r["system"] for r in rows if r["adapter"] != "apogee"})
    out = []
    for label, workload, key, factor in _TARGETS[record.get("flush", "ASYNC_FLUSH")]:
        ours = _median(rows, apogee, workload, key)
        theirs = [(m, p) for p in peers if (m := _median(rows, p, workload, key)) is not None]
        if ours is None or not theirs:
            continue
        best, peer = min(theirs) if factor < 0 else max(theirs)
        ratio = ours / best
        met = ratio <= -factor if factor < 0 else ratio >= factor
        if met and workload == "W1":  # "p99 no worse" than that peer's
            met = (_median(rows, apogee, "W1", "p99_us") or 0) <= (_median(rows, peer, "W1", "p99_us") or 0)
        unit = " us" if factor < 0 else "/s"
        out.append((label, f"{ours:,.0f}{unit}", f"{peer} {best:,.0f}{unit}", ratio, met))
    return out


def render_peers(record: dict[str, Any]) -> str:
    rows = record["rows"]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    apogee = {r["system"] for r in rows if r["adapter"] == "apogee"}
    names = {s: apogee_name(s) if s in apogee else s for s in systems}  # Apogee's rows carry the run's label
    workloads = [w for w in ("W1", "W2", "W3", "W4", "W5") if any(r["workload"] == w for r in rows)]
    reps = max(r.get("rep", 1) for r in rows)
    flush = record.get("flush", "ASYNC_FLUSH")
    out = [f"The peer harness (`../shared/bench`), Apogee under {flush} and the peers one after the other in one "
           f"run, {record['date']}, commit {record['commit']}, medians of {reps} [min-max]:", "", "```sh",
           *record["commands"], "```", ""]
    heads = {"W1": ["W1 msgs/s", "W1 p50 / p99 us"], "W2": ["W2 msgs/s"], "W3": ["W3 msgs/s"],
             "W4": ["W4 e2e p50 / p99 us"], "W5": ["W5 100 B msgs/s"]}
    table = []
    for s in systems:
        cells = [names[s]]
        for w in workloads:
            if w == "W1":
                cells += [_spread(_values(rows, s, w, "msgs_per_s")),
                          _pair(_values(rows, s, w, "p50_us"), _values(rows, s, w, "p99_us"))]
            elif w == "W4":
                cells.append(_pair(_values(rows, s, w, "e2e_p50_us"), _values(rows, s, w, "e2e_p99_us")))
            else:
                cells.append(_spread(_values(rows, s, w, "msgs_per_s")))
        table.append(cells)
    out += _markdown_table(["system"] + [h for w in workloads for h in heads[w]], table)
    out += ["", "CPU in cores, server / client (medians):", ""]
    cpu = []
    for s in systems:
        cells = [names[s]]
        for w in workloads:
            sv, cl = _median(rows, s, w, "server_cpu_cores"), _median(rows, s, w, "client_cpu_cores")
            cells.append("" if sv is None or cl is None else f"{sv:.2f} / {cl:.2f}")
        cpu.append(cells)
    out += _markdown_table(["system", *workloads], cpu)
    met_rows = [(label, ours, best, f"{ratio:.2f}", "yes" if met else "no")
                for label, ours, best, ratio, met in targets(record)]
    out += ["", f"Issue 23's targets under {flush}:", ""]
    out += _markdown_table(["target", "Apogee", "best peer, same run", "ratio", "met"], met_rows)
    noisy = sum(1 for r in rows if r.get("noisy"))
    errors = sum(1 for r in rows if "error" in r)
    if noisy or errors:
        out += ["", f"Repetitions the harness flagged noisy: {noisy}; failed: {errors}."]
    return "\n".join(out) + "\n"


def _pair(first: Sequence[float], second: Sequence[float]) -> str:
    if not first or not second:
        return ""
    return f"{_spread(first)} / {_spread(second)}"


# --- the docs ------------------------------------------------------------------------------


def blocks(text: str) -> list[tuple[str, str]]:
    """(record name, the block's current text) of every figures block in ``text``."""
    return [(m["name"], m["body"]) for m in _BLOCK.finditer(text)]


def rewrite(text: str, results: Path = RESULTS) -> str:
    """``text`` with every figures block written from its record."""
    return _BLOCK.sub(lambda m: m[1] + render(load(m["name"], results)) + m[4], text)


def stale(paths: Iterable[Path] = DOCS, results: Path = RESULTS, root: Path = ROOT) -> list[str]:
    """The blocks whose text is not what their record renders: ``path: name`` each, the
    path relative to ``root``."""
    out = []
    for path in paths:
        text = path.read_text()
        shown = path.relative_to(root)
        for name, body in blocks(text):
            if not has_record(name, results):
                out.append(f"{shown}: {name} (no record benchmarks/results/{name}.json[l])")
            elif body != render(load(name, results)):
                out.append(f"{shown}: {name}")
    return out


def has_record(name: str, results: Path = RESULTS) -> bool:
    return (results / f"{name}.json").exists() or (results / f"{name}.jsonl").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report blocks that differ from their records")
    args = parser.parse_args()
    if args.check:
        bad = stale()
        for line in bad:
            print(f"stale: {line}")
        sys.exit(1 if bad else 0)
    for path in DOCS:
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            path.write_text(new)
            print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
