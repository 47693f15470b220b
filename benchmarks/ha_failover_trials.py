"""SYNC_MASTER + SYNC_FLUSH failover trials (issue 19): the test's trial
(``tests/interop/ha_failover.py``) run N times, one line per trial.

Each trial: a master and one slave on loopback ports; Apogee's producer and the RocketMQ C++
producer send; both push consumers (Apogee's and the C++ client's) pause so a backlog builds;
the master is SIGKILLed while both producers send; every message acknowledged SEND_OK must
then reach both consumers from the slave with body, keys, tags and properties intact.

    .venv/bin/python benchmarks/ha_failover_trials.py --trials 20

Prints acked counts, what each consumer missed, damaged messages and what the slave served;
exits 1 when any trial lost or damaged an acknowledged message.  Needs ``.venv-interop``
(``make interop``).  Every server binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop.ha_failover import run_trial  # noqa: E402


async def main(trials: int) -> int:
    failed = 0
    for n in range(1, trials + 1):
        with tempfile.TemporaryDirectory(prefix="apogee-ha-") as base:
            started = time.monotonic()
            result = await run_trial(Path(base))
        failed += not result.ok
        verdict = "ok" if result.ok else f"LOSS {result.lost_py_consumer[:5] + result.lost_cpp_consumer[:5]}"
        print(
            f"trial {n:2d}: acked python {result.acked_py:5d} C++ {result.acked_cpp:5d} | "
            f"missed by python consumer {len(result.lost_py_consumer)} by C++ consumer "
            f"{len(result.lost_cpp_consumer)} | damaged {len(result.damaged)} | slave served {result.slave_gets} | "
            f"{time.monotonic() - started:.1f} s {verdict}",
            flush=True,
        )
    print(f"{trials - failed} of {trials} trials lost nothing acknowledged")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    sys.exit(asyncio.run(main(parser.parse_args().trials)))
