"""The exactly-once streaming sink: transactional half messages, committed per micro-batch.

Protocol (for query Q, micro-batch N):

1. **Tasks** (executors) read Q and N from Spark's task properties and send every row as a
   transactional *half* message (invisible to consumers) tagged ``Q:N:task`` in the
   ``__APOGEE_SPARK_TXN`` property, where ``task`` is unique per task attempt.  Each task
   returns, in its ``WriterCommitMessage``, the half messages it sent (broker address, offset
   message id, half-queue offset).  A task of a batch already recorded as committed (a replay)
   sends nothing.
2. **The driver's commit** (Spark runs it once all tasks succeeded) first records "batch N of
   query Q is committed, made of these task attempts" durably, then commits every half
   message of the successful attempts (END_TRANSACTION).  If N was already recorded, the
   batch is a replay (Spark re-runs a batch whose commit finished but whose commit-log entry
   was lost with the driver): its new halves are rolled back instead.
3. **Orphans** — halves whose task attempt failed, whose commit was interrupted by a
   crash, or whose commit the broker refused because its check had already re-put a copy
   of the half (a batch slower than ``transactionTimeoutSeconds``; the copy is then the one
   undecided half of that message, see ``apogee.broker.transaction``) — are decided by the
   broker's transaction check-back: the driver-side process that ran the last commit
   registers as the producer group and answers each check from the record: commit when the
   half's batch is recorded and its task attempt is in it, roll back when the batch is
   recorded without it, "unknown" (ask again later) while the batch may still commit.

The record lives in the NameServers' KV table (namespace ``APOGEE_SPARK_SINK``, key = the
query id): every NameServer writes it to disk before answering, so it survives a driver crash
and a NameServer restart, and it holds a string, so the committed task attempts fit next to
the batch number (a consumer offset would hold one integer and is flushed by the broker only
every few seconds).  It keeps the last ``transactionHistory`` batches.

What a consumer sees: a micro-batch's messages become visible together when its commit runs,
like Kafka's read_committed; a batch is never visible twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql.datasource import WriterCommitMessage

from apogee.common import constants as c
from apogee.common.message_codec import decode_record
from apogee.common.message_id import decode_offset_msg_id
from apogee.errors import ApogeeError
from apogee.remoting.bodies.heartbeat import HeartbeatData
from apogee.remoting.codes import RequestCode
from apogee.remoting.command import RemotingCommand
from apogee.remoting.connection import Connection
from apogee.remoting.headers.send import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from apogee.spark import runtime
from apogee.spark.broker import Cluster
from apogee.spark.errors import ApogeeSparkError
from apogee.spark.options import SinkOptions
from apogee.spark.schema import TXN_PROPERTY
from apogee.spark.writer import SentCommit, SinkColumns, send_partition, sink_sender

log = logging.getLogger("apogee.spark.txn")

NAMESPACE = "APOGEE_SPARK_SINK"
COMMIT = 8
ROLLBACK = 12
UNKNOWN = 0
HEARTBEAT_INTERVAL_S = 15.0
END_WINDOW = 256  # END_TRANSACTION requests in flight on one connection


@dataclass
class BatchEntry:
    tasks: list[str]
    ended: bool = False


@dataclass
class CommitRecord:
    """Batches of one query recorded as committed: their task attempts, and whether the
    driver finished committing their halves itself (``ended``)."""

    batch: int = -1
    batches: dict[int, BatchEntry] = field(default_factory=dict)

    def encode(self) -> str:
        return orjson.dumps(
            {
                "batch": self.batch,
                "batches": {str(k): {"tasks": v.tasks, "ended": v.ended} for k, v in sorted(self.batches.items())},
            }
        ).decode()

    @classmethod
    def decode(cls, text: str | None) -> CommitRecord:
        if not text:
            return cls()
        try:
            obj = orjson.loads(text)
            batches = {int(k): BatchEntry(list(v["tasks"]), bool(v.get("ended"))) for k, v in obj["batches"].items()}
            return cls(int(obj["batch"]), batches)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ApogeeSparkError(f"the sink's commit record is unreadable ({exc}): {text[:100]!r}") from None

    def with_batch(self, batch: int, tasks: list[str], history: int) -> CommitRecord:
        """This record plus ``batch``; ended batches beyond the last ``history`` are dropped
        (batches whose commit was interrupted stay until the check-back no longer needs them)."""
        batches = dict(self.batches)
        batches[batch] = BatchEntry(sorted(tasks))
        keep_from = batch - history
        batches = {b: e for b, e in batches.items() if b > keep_from or not e.ended}
        return CommitRecord(max(self.batch, batch), batches)

    def ended(self, batch: int) -> CommitRecord:
        batches = dict(self.batches)
        entry = batches.get(batch)
        if entry is not None:
            batches[batch] = BatchEntry(entry.tasks, True)
        return CommitRecord(self.batch, batches)

    def decide(self, batch: int, task: str) -> int:
        """COMMIT, ROLLBACK or UNKNOWN for a half message of ``batch`` sent by ``task``.

        * a batch not recorded yet may still commit: UNKNOWN (the broker asks again);
        * a recorded batch whose halves the driver committed itself (``ended``: the broker
          accepted every END_TRANSACTION), or one old enough to be dropped from the record:
          every half of its tasks is decided already, so a half still asked about is a failed
          attempt's: ROLLBACK;
        * a recorded batch whose commit was interrupted or not accepted whole: COMMIT exactly
          its task attempts.  The half asked about is a check's copy, and the broker refuses
          END_TRANSACTION for a half once its check put a copy back, so no earlier copy of the
          message (the original the driver sent the commit for, or a copy whose answer came
          late) can have been committed: the copy is the message's one chance.
        """
        if batch > self.batch:
            return UNKNOWN
        entry = self.batches.get(batch)
        if entry is None or entry.ended:
            return ROLLBACK
        return COMMIT if task in entry.tasks else ROLLBACK


async def load_record(cluster: Cluster, query_id: str) -> CommitRecord:
    """The most advanced record among the NameServers."""
    best = CommitRecord()
    for text in await cluster.kv_get(NAMESPACE, query_id):
        record = CommitRecord.decode(text)
        if record.batch > best.batch:
            best = record
    return best


@dataclass
class TxnCommit(SentCommit):
    query_id: str = ""
    batch_id: int = -1


def task_identity() -> tuple[str, int, int, int]:
    """(query id, batch id, partition, attempt) of the running sink task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
    batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    if ctx is None or not query_id or batch is None:
        raise ApogeeSparkError(
            "deliveryGuarantee=exactlyOnce needs the streaming query and batch ids Spark gives sink tasks, and this "
            "task has none; use deliveryGuarantee=atLeastOnce"
        )
    return query_id, int(batch), ctx.partitionId(), ctx.attemptNumber()


def half_tag(opts: SinkOptions, query_id: str, batch_id: int, task: str) -> dict[str, str]:
    """Properties that make a message a half message of this sink and batch.  The check
    immunity keeps the broker from checking halves back while their batch is still running
    (each check re-stores a copy of the half)."""
    return {
        c.TRAN_MSG: "true",
        c.PGROUP: opts.producer_group,
        c.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: str(opts.transaction_timeout_s),
        TXN_PROPERTY: f"{query_id}:{batch_id}:{task}",
    }


def write_halves(opts: SinkOptions, columns: SinkColumns, batches: Iterator[pa.RecordBatch]) -> TxnCommit:
    """A sink task: the rows as half messages of (query, batch, this attempt)."""
    query_id, batch_id, partition, attempt = task_identity()
    cluster = Cluster(runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms)
    record = runtime.run(load_record(cluster, query_id), opts.request_timeout_ms / 1000 * 2 + 10)
    if record.batch >= batch_id:
        skipped = sum(b.num_rows for b in batches)
        log.info("batch %d of query %s is already committed: %d rows not sent again", batch_id, query_id, skipped)
        return TxnCommit(partition, 0, skipped=True, query_id=query_id, batch_id=batch_id)
    task = f"{partition}.{attempt}.{uuid.uuid4().hex[:12]}"
    tag = half_tag(opts, query_id, batch_id, task)
    count, halves = send_partition(opts, columns, batches, half_properties=tag)
    return TxnCommit(partition, count, task=task, halves=halves, query_id=query_id, batch_id=batch_id)


async def end_all(cluster: Cluster, group: str, halves: list[tuple[str, str, int]], decision: int) -> None:
    """END_TRANSACTION for every half, pipelined per broker (``END_WINDOW`` requests in flight
    on one connection), every answer checked.  The answers matter: the broker refuses a half
    its check has already put a copy of back (the copy decides the transaction then, through
    the check-back), so a batch whose halves were not all accepted must not be marked ended.
    Raises on a refusal or failure, after every half was tried: the caller then leaves the
    halves to the check-back.
    """
    by_broker: dict[str, list[tuple[str, int]]] = {}
    for addr, msg_id, offset in halves:
        by_broker.setdefault(addr, []).append((msg_id, offset))
    errors: list[str] = []

    def request(msg_id: str, offset: int) -> RemotingCommand:
        _, _, phys = decode_offset_msg_id(msg_id)
        header = EndTransactionRequestHeader(
            producer_group=group,
            tran_state_table_offset=offset,
            commit_log_offset=phys,
            commit_or_rollback=decision,
            msg_id=msg_id,
        )
        return RemotingCommand.request(RequestCode.END_TRANSACTION, header.encode())

    async def one_broker(addr: str, items: list[tuple[str, int]]) -> None:
        # A sliding window of END_WINDOW requests, answers taken by a callback (no future
        # per request): the answers cost the broker a response each, so little else may.
        window = asyncio.Semaphore(END_WINDOW)
        finished = asyncio.get_running_loop().create_future()
        left = len(items)

        def answered(resp: RemotingCommand | None, error: BaseException | None) -> None:
            nonlocal left
            window.release()
            if error is not None:
                errors.append(f"{addr}: {error}")
            elif resp is not None and resp.code != 0:
                errors.append(f"{addr}: code {resp.code} {resp.remark}")
            left -= 1
            if left == 0 and not finished.done():
                finished.set_result(None)

        try:
            conn = await cluster.api.remoting.connection(addr)
            for item in items:
                await window.acquire()
                conn.invoke_callback(request(*item), cluster.timeout_ms, answered)
        except ApogeeError as exc:
            errors.append(f"{addr}: {exc}")
            return
        await finished

    await asyncio.gather(*(one_broker(a, items) for a, items in by_broker.items()))
    if errors:
        raise ApogeeSparkError(
            f"not every half message could be {'committed' if decision == COMMIT else 'rolled back'} "
            f"({len(errors)} refused or failed, first: {errors[0]}); "
            "the broker's transaction check-back will decide them"
        )


def _messages(messages: list[WriterCommitMessage | None]) -> list[TxnCommit]:
    return [m for m in messages if isinstance(m, TxnCommit)]


def commit_batch(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
    """The driver's commit of micro-batch ``batch_id``: record it, then commit its halves."""
    done = _messages(messages)
    if not done:
        return
    query_id = done[0].query_id
    cluster = Cluster(runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms)
    timeout = opts.request_timeout_ms / 1000 * 4 + 60

    async def commit() -> None:
        resolver = await Resolver.ensure(opts)
        record = await load_record(cluster, query_id)
        halves = [h for m in done for h in m.halves]
        resolver.watch(h[0] for h in halves)
        if record.batch >= batch_id:
            log.info(
                "batch %d of query %s was committed before: rolling back its %d new half messages",
                batch_id,
                query_id,
                len(halves),
            )
            with contextlib.suppress(ApogeeSparkError):  # left to the check-back: not in the record
                await end_all(cluster, opts.producer_group, halves, ROLLBACK)
            return
        tasks = [m.task for m in done if not m.skipped and m.task]
        record = record.with_batch(batch_id, tasks, opts.transaction_history)
        await cluster.kv_put(NAMESPACE, query_id, record.encode())
        _fault("after-record", batch_id)
        try:
            await end_all(cluster, opts.producer_group, halves, COMMIT)
        except ApogeeSparkError as exc:
            # Recorded is committed: what the broker did not accept (a half it checked back
            # while the batch ran longer than transactionTimeoutSeconds, or a lost connection)
            # is committed by the check-back, from the record.  Not marked ended, so the
            # check-back commits the recorded attempts' copies instead of rolling them back.
            log.warning("batch %d of query %s is recorded; %s", batch_id, query_id, exc)
            return
        await cluster.kv_put(NAMESPACE, query_id, record.ended(batch_id).encode())
        log.info("batch %d of query %s committed: %d messages", batch_id, query_id, len(halves))

    halves_count = sum(len(m.halves) for m in done)
    runtime.run(commit(), timeout + halves_count / 1000)  # ~1 ms per END_TRANSACTION at worst


def abort_batch(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
    """Spark gave up the batch: roll back the halves of its successful tasks (the failed
    ones are rolled back by the check-back)."""
    done = _messages(messages)
    if not done:
        return
    query_id = done[0].query_id
    cluster = Cluster(runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms)

    async def abort() -> None:
        await Resolver.ensure(opts)
        record = await load_record(cluster, query_id)
        if record.batch >= batch_id:
            return  # recorded as committed: its halves must commit, not roll back
        await end_all(cluster, opts.producer_group, [h for m in done for h in m.halves], ROLLBACK)

    runtime.run(abort(), opts.request_timeout_ms / 1000 * 4 + 60 + sum(len(m.halves) for m in done) / 1000)


def _fault(point: str, batch_id: int) -> None:
    """Fault injection for the crash tests: ``APOGEE_SPARK_FAULT=after-record:<batch>:<pgid>``
    kills process group ``pgid`` (the test's Spark driver) with SIGKILL at that point, and
    this process too: Spark's Python workers (this commit runs in one) are in the group of
    PySpark's daemon, not the driver's, and would otherwise go on committing the batch until
    the daemon notices the driver is gone."""
    spec = os.environ.get("APOGEE_SPARK_FAULT", "")
    if not spec:
        return
    where, _, rest = spec.partition(":")
    batch, _, pgid = rest.partition(":")
    if where == point and batch == str(batch_id) and pgid.isdigit():
        import signal

        log.warning("fault injection: killing process group %s %s of batch %d", pgid, point, batch_id)
        os.killpg(int(pgid), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


class Resolver:
    """Answers the brokers' CHECK_TRANSACTION_STATE for the sink's producer group from the
    commit records; one per process and group, living on the runtime loop (heartbeats keep
    the broker's producer registration alive)."""

    _instances: dict[tuple[int, str, str], Resolver] = {}

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.cluster = Cluster(
            runtime.runtime().api_for(opts.tls, opts.credentials), opts.namesrv, opts.request_timeout_ms
        )
        self.brokers: set[str] = set()
        self.client_id = f"apogee-spark-sink@{os.getpid()}@{uuid.uuid4().hex[:6]}"
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @classmethod
    async def ensure(cls, opts: SinkOptions) -> Resolver:
        key = (os.getpid(), opts.namesrv, opts.producer_group)
        resolver = cls._instances.get(key)
        if resolver is None:
            resolver = cls._instances[key] = cls(opts)
            # Brokers send checks over the connection the heartbeat came on: the runtime's.
            runtime.runtime().dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, _dispatch_check)
            await resolver._discover()
            resolver._task = asyncio.ensure_future(resolver._heartbeats())
        await resolver.heartbeat()
        return resolver

    def watch(self, addrs: Any) -> None:
        new = set(addrs) - self.brokers
        if new:
            self.brokers |= new
            self._wake.set()

    async def _discover(self) -> None:
        if self.opts.topic:
            sender = sink_sender(self.opts)
            try:
                info = await sender.publish_info(self.opts.topic)
                self.brokers |= {a for q in info.queues if (a := sender.routes.master_addr(q.broker_name))}
            except ApogeeError as exc:
                log.warning("no route for %s yet: %s", self.opts.topic, exc)

    async def heartbeat(self) -> None:
        body = HeartbeatData(self.client_id, [self.opts.producer_group], []).encode()

        async def one(addr: str) -> None:
            try:
                await self.cluster.api.heartbeat(addr, body, self.opts.request_timeout_ms)
            except ApogeeError as exc:
                log.warning("heartbeat of sink group %s to %s failed: %s", self.opts.producer_group, addr, exc)

        await asyncio.gather(*(one(a) for a in sorted(self.brokers)))

    async def _heartbeats(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), HEARTBEAT_INTERVAL_S)
            self._wake.clear()
            try:
                await self.heartbeat()
            except Exception:
                log.exception("sink heartbeat failed")

    async def check(self, conn: Connection, req: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.decode(req.ext_fields)
        msg = decode_record(req.body_bytes())
        tag = msg.properties.get(TXN_PROPERTY, "")
        group = msg.properties.get(c.PGROUP, self.opts.producer_group)
        query_id, _, rest = tag.partition(":")
        batch_text, _, task = rest.partition(":")
        if not query_id or not batch_text.isdigit() or not task:
            return  # not one of ours
        record = await load_record(self.cluster, query_id)
        decision = record.decide(int(batch_text), task)
        log.info(
            "check-back for query %s batch %s task %s: %s",
            query_id,
            batch_text,
            task,
            {COMMIT: "commit", ROLLBACK: "rollback", UNKNOWN: "unknown"}[decision],
        )
        end = EndTransactionRequestHeader(
            producer_group=group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=decision,
            msg_id=header.msg_id or "",
            from_transaction_check=True,
            transaction_id=header.transaction_id,
        )
        conn.invoke_oneway(RemotingCommand.request(RequestCode.END_TRANSACTION, end.encode()))


def _dispatch_check(conn: Connection, req: RemotingCommand) -> Any:
    if not req.body:
        return None
    try:
        props = decode_record(req.body_bytes()).properties
    except ValueError:
        return None
    group = props.get(c.PGROUP, "")
    for (pid, _, g), resolver in list(Resolver._instances.items()):
        if pid == os.getpid() and g == group:
            return resolver.check(conn, req)
    return None
