from __future__ import annotations

import asyncio

from apogee.admin.errors import GroupNotFoundError
from apogee.dashboard.jobs import Job, JobRegistry


async def test_a_job_reports_progress_then_its_result() -> None:
    registry = JobRegistry()
    step = asyncio.Event()

    async def reset(job: Job) -> dict[str, int]:
        job.tick(1, 3)
        job.note("broker-a done")
        await step.wait()
        job.tick(3, 3)
        return {"queues": 12}

    job = registry.start("reset offsets of G", reset)
    await asyncio.sleep(0)
    running = registry.get(job.id)
    assert running is not None and running.to_json()["state"] == "running"
    assert (running.done, running.total, running.message) == (1, 3, "broker-a done")
    step.set()
    while job.state == "running":
        await asyncio.sleep(0)
    assert job.to_json()["result"] == {"queues": 12} and job.state == "done" and job.finished >= job.started
    assert registry.get("nope") is None


async def test_a_failed_job_carries_the_problem_a_page_shows() -> None:
    registry = JobRegistry()

    async def fails(job: Job) -> None:
        raise GroupNotFoundError("consumer group 'G' does not exist")

    job = registry.start("reset", fails)
    while job.state == "running":
        await asyncio.sleep(0)
    assert job.state == "failed"
    assert job.to_json()["error"]["title"] == "Not found"


async def test_close_cancels_what_is_still_running() -> None:
    registry = JobRegistry()

    async def forever(job: Job) -> None:
        await asyncio.Event().wait()

    job = registry.start("search", forever)
    await asyncio.sleep(0)
    await registry.close()
    assert job.state == "failed" and job.error is not None and job.error.title == "Cancelled"
