"""When a broker that died starts again (pure).

A broker killed by the OOM killer or a crash is restarted at once (half a second), so its
queues are back within about a second plus its recovery; one that keeps dying (a full disk,
a config edited into something invalid, a port taken) is restarted ever more slowly, up to
once every ``max_s``, so a supervisor in a restart loop neither burns a core nor floods the
log.  A broker that ran ``stable_s`` before it died counts as healthy again: its next
restart is quick.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0
STABLE_AFTER_S = 60.0


@dataclass
class RestartBackoff:
    first_s: float = FIRST_DELAY_S
    max_s: float = MAX_DELAY_S
    stable_s: float = STABLE_AFTER_S
    failures: int = 0  # deaths in a row, each after less than stable_s of running

    def delay_after(self, ran_s: float) -> float:
        """Seconds to wait before starting again a broker that died after ``ran_s`` seconds."""
        if ran_s >= self.stable_s:
            self.failures = 0
        self.failures += 1
        return min(self.max_s, self.first_s * float(1 << min(self.failures - 1, 32)))
