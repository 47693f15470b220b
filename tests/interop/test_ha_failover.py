"""SYNC_MASTER + SYNC_FLUSH failover (issue 19): SIGKILL the master under load from Apogee's
and the C++ producer; every acknowledged message is consumed from the slave, intact, by
Apogee's push consumer and the C++ push consumer, neither restarted.  ``APOGEE_HA_TRIALS``
trials (1 by default, for `make test`'s time; ``benchmarks/ha_failover_trials.py --trials 20``
runs the issue's 20)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.interop.ha_failover import run_trial

TRIALS = int(os.environ.get("APOGEE_HA_TRIALS", "1"))


async def test_every_acknowledged_message_survives_the_masters_death(tmp_path: Path) -> None:
    for trial in range(TRIALS):
        result = await run_trial(tmp_path / f"trial{trial}", log=True)
        assert result.acked_py > 0 and result.acked_cpp > 0
        assert result.slave_gets > 0  # the backlog came from the slave
        assert not result.damaged, result.damaged[:10]
        assert not result.lost_py_consumer, (trial, result.acked_py, result.acked_cpp, result.lost_py_consumer[:20])
        assert not result.lost_cpp_consumer, (trial, result.acked_py, result.acked_cpp, result.lost_cpp_consumer[:20])
