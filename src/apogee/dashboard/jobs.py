"""Long operations with progress: a reset of offsets across brokers, a message search over a
large range, a walk over every topic.

A handler starts the work with ``JobRegistry.start(title, work)`` and answers at once with
the job's id; the page polls ``GET /jobs/{id}`` (JSON: state, done, total, message, result or
error) and draws a progress bar (``static/app.js``, ``pollJob``).  ``work`` receives the
``Job`` and reports with ``job.tick(done, total)`` (the admin layer's ``Tick``) or
``job.note(message)``.  Finished jobs are kept for a while, so a late poll still finds the
result.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from apogee.dashboard.errors import BadInput, Problem, describe
from apogee.dashboard.web import json_response
from apogee.errors import ApogeeError

log = logging.getLogger("apogee.dashboard")

KEEP_FINISHED = 200  # finished jobs remembered for late polls


@dataclass
class Job:
    id: str
    title: str
    state: str = "running"  # running | done | failed
    done: int = 0
    total: int = 0
    message: str = ""
    result: Any = None
    error: Problem | None = None
    started: float = field(default_factory=time.time)
    finished: float = 0.0

    def tick(self, done: int, total: int) -> None:
        """Progress so far (the signature of ``apogee.admin.base.Tick``)."""
        self.done, self.total = done, total

    def note(self, message: str) -> None:
        self.message = message

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "state": self.state, "done": self.done, "total": self.total,
            "message": self.message, "result": self.result,
            "error": self.error.to_json() if self.error is not None else None,
            "started": self.started, "finished": self.finished,
        }


Work = Callable[[Job], Awaitable[Any]]


class JobRegistry:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._seq = itertools.count(1)

    def start(self, title: str, work: Work) -> Job:
        """Run ``work(job)`` in the background; its return value (JSON-able) is the result."""
        job = Job(f"{next(self._seq)}-{secrets.token_hex(4)}", title)
        self._jobs[job.id] = job
        task = asyncio.get_running_loop().create_task(self._run(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._forget_old()
        return job

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    async def _run(self, job: Job, work: Work) -> None:
        try:
            job.result = await work(job)
            job.state = "done"
        except asyncio.CancelledError:
            job.state, job.error = "failed", Problem("Cancelled", "the dashboard is stopping", 503)
            raise
        except Exception as exc:
            job.state, job.error = "failed", describe(exc)
            if not isinstance(exc, (ApogeeError, BadInput)):
                log.error("job %s (%s) failed", job.id, job.title, exc_info=exc)
        finally:
            job.finished = time.time()

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state != "running"]
        for job in sorted(finished, key=lambda j: j.finished)[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job.id]

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def job_status(request: Request) -> Response:
    """``GET /jobs/{id}``: what ``pollJob`` in ``static/app.js`` reads."""
    registry: JobRegistry = request.app.state.ctx.jobs
    job = registry.get(request.path_params["job_id"])
    if job is None:
        return json_response({"error": Problem("Not found", "no such job (finished long ago?)", 404).to_json()}, 404)
    return json_response(job.to_json())


routes: list[BaseRoute] = [Route("/jobs/{job_id}", job_status, name="job")]
