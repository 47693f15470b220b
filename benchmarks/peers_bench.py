"""Apogee beside the peers in one run, through the shared harness (issue 23's table), as one
command whose output is the record the docs show.

Starts `apogee namesrv` and `apogee broker` from this checkout (loopback only, a fresh store,
``flushDiskType`` as asked), runs the harness's workloads against them through Apogee's own
client (`../shared/bench`, `mqbench.peers --peer external --adapter apogee`), stops them by
PID, then runs each peer the same way (the harness starts and stops its servers itself), and
keeps every row as ``benchmarks/results/NAME.jsonl`` (``benchmarks/figures.py``): the table,
the ratios to the best peer and the verdicts are computed from those rows, never typed.

The harness's Python needs its peers' clients installed (the harness README's set-up); this
checkout's ``src`` goes first on its path, so the client measured is the one beside the broker.

    .venv/bin/python benchmarks/peers_bench.py --python /tmp/vbench/bin/python --record peers-async
    .venv/bin/python benchmarks/peers_bench.py --python /tmp/vbench/bin/python --flush SYNC_FLUSH --record peers-sync
    .venv/bin/python benchmarks/peers_bench.py --python /tmp/vbench/bin/python --busy-poll-us 0,200 \\
        --record peers-async-busypoll
    .venv/bin/python benchmarks/figures.py

``--busy-poll-us 0,200`` runs Apogee twice, without and with busy polling on both its broker
and its client, beside the same peers.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apogee.remoting.config import BUSY_POLL_ENV  # noqa: E402
from benchmarks.figures import apogee_label, command_line, measured_commit, save_peers  # noqa: E402
from tests.support.processes import start_broker, start_namesrv  # noqa: E402

# The peers issue 23 compares with, by durability: (harness --peer, --systems, workloads).
PEERS = {
    "ASYNC_FLUSH": (("redis", None, "W1,W4"), ("rabbitmq", "rabbitmq-stream (rstream)", "W2,W3,W5")),
    "SYNC_FLUSH": (("rabbitmq", "rabbitmq-quorum (pika)", "W1,W4"),),
}
WORKLOADS = {"ASYNC_FLUSH": "W1,W2,W3,W4,W5", "SYNC_FLUSH": "W1,W4"}


def harness(python: str, bench: Path, args: list[str], env: dict[str, str] | None = None) -> None:
    """One ``mqbench.peers`` invocation in the harness's folder; its per-run lines are shown."""
    print("$", " ".join(args), flush=True)
    subprocess.run([python, "-m", "mqbench.peers", *args], cwd=bench, check=True,
                   env={**os.environ, **(env or {})})


def run_apogee(
    args: argparse.Namespace, bench: Path, root: Path, result: Path, label: str, flag: str, busy_poll_us: int
) -> None:
    """A fresh NameServer and broker from this checkout, the harness's workloads against them
    through Apogee's client, both stopped by PID."""
    namesrv = start_namesrv(root / "ns")
    try:
        conf = (f"brokerClusterName=Bench\nbrokerName=bench-a\nautoCreateTopicEnable=true\n"
                f"flushDiskType={args.flush}\n")
        broker = start_broker(namesrv.addr, root / "store", conf, "--log-level", "WARNING",
                              "--busy-poll-us", str(busy_poll_us))
        try:
            harness(args.python, bench, [
                "--peer", "external", "--adapter", "apogee", "--label", label,
                "--server-pids", f"{broker.pid},{namesrv.pid}", "--opt", f"namesrv={namesrv.addr}",
                "--opt", f"flush={flag}", "--workloads", WORKLOADS[args.flush], "--repeat", str(args.repeat),
                "--out", str(result),
            ], env={"PYTHONPATH": str(ROOT / "src"), BUSY_POLL_ENV: str(busy_poll_us)})
        finally:
            broker.close()
    finally:
        namesrv.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the harness's Python (its README's venv)")
    parser.add_argument("--bench", default=str(ROOT.parent / "shared" / "bench"), help="the harness's folder")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=sorted(PEERS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="Apogee only (a record needs the peers)")
    parser.add_argument("--record", metavar="NAME", help="save every row as benchmarks/results/NAME.jsonl")
    parser.add_argument(
        "--busy-poll-us", default="0", metavar="US[,US...]",
        help="Apogee runs once per value, broker (--busy-poll-us) and client ($APOGEE_BUSY_POLL_US) "
        "polling that long after traffic; 0: off (docs/performance.md, Busy polling)",
    )
    args = parser.parse_args()
    try:
        windows = [int(v) for v in args.busy_poll_us.split(",")]
    except ValueError:
        parser.error("--busy-poll-us takes whole microseconds, e.g. 0,200")
    if args.record and args.no_peers:
        parser.error("a record compares Apogee with the peers of the same run: drop --no-peers")
    bench = Path(args.bench).resolve()
    flag = "sync" if args.flush == "SYNC_FLUSH" else "async"
    commit = measured_commit()
    with tempfile.TemporaryDirectory(prefix="peers-bench-") as tmp:
        out = Path(tmp)
        files = []
        for window in windows:
            files.append(out / f"apogee-{window}.jsonl")
            run_apogee(args, bench, out / f"apogee-{window}", files[-1], apogee_label(commit, window), flag, window)
        if not args.no_peers:
            for n, (peer, systems, workloads) in enumerate(PEERS[args.flush]):
                files.append(out / f"peer{n}.jsonl")
                harness(args.python, bench, [
                    "--peer", peer, *(["--systems", systems] if systems else []), "--workloads", workloads,
                    "--repeat", str(args.repeat), "--out", str(files[-1]),
                ])
        if args.record:
            path = save_peers(args.record, files, [command_line()], args.flush, commit)
            print(f"recorded {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
