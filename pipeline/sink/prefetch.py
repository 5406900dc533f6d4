"""The sink's fetch: one batch fetched and decoded ahead while the previous one is written.

Used by :class:`pipeline.sink.loop.Sink`. Without it the loop ran fetch, decode, write and commit
strictly in turn, so the Kafka fetch (aiokafka buffers one fetch response per partition) and
the decoding never overlapped the PostgreSQL write (bench ``sink-ingest``: ~0.6 s of waiting
in ``getmany`` per 20k lines). With it, as soon as batch N is taken, the fetch and decode of
batch N+1 start as a task on the event loop while batch N is written in a worker thread.

What keeps delivery exactly as before (at least once, idempotent writes; :mod:`pipeline.sink.loop`):

* depth one: at most one batch is fetched ahead, and it is only fetched, never written or
  committed, until batch N's offsets are committed (or N was rewound);
* batches are written and committed in fetch order, so a committed offset never passes a
  record not yet written;
* when batch N cannot be written, the batch fetched ahead is awaited and dropped, and the
  consumer is rewound to the first offset of each partition in either batch
  (:func:`rewind_offsets`), so both are read again;
* a rebalance while a batch waits: its records of a partition no longer assigned are dropped
  (the new owner reads them from the committed offset), and so are those of a partition given
  back to this sink whose position was reset to the committed offset at or before them (they
  will be fetched again): :meth:`Prefetcher.take` keeps a partition's records only when the
  partition is assigned and the consumer's position is past them;
* a stop: no batch is fetched ahead once a stop is requested; one already fetched is archived
  and committed by the sink's last ``run_once`` (:meth:`pipeline.sink.loop.Sink.run`), or dropped
  uncommitted by :meth:`Prefetcher.cancel` (read again by the next sink).

Source for aiokafka's behaviour (position reset to the committed offset on assignment, one
buffered fetch per partition): https://aiokafka.readthedocs.io/en/stable/consumer.html.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final

from models.records import JobEvent, LineEnvelope
from pipeline.errors import PartitionsRevokedError
from pipeline.kafka import consumer as kafka_consumer
from pipeline.kafka.dead_letters import Record
from pipeline.sink.decode import Dead, Item, decode_batch

logger = logging.getLogger("pipeline.sink.loop")

LINGER_UNTIL_RECORDS: Final = 1000
"""A lingering batch is written as soon as it holds this many records."""
Batches = dict[Any, list[Record]]
"""Records by ``aiokafka.TopicPartition``, in offset order (``getmany``'s answer)."""


@dataclass
class Fetched:
    """One fetched batch, decoded.

    Attributes:
        batches: The records by partition (for the commit and a rewind).
        items: Decoded records, in fetch order.
        dead: Records that cannot be archived, with the reason (to dead-letter).
    """

    batches: Batches
    items: list[Item] = field(default_factory=list)
    dead: list[Dead] = field(default_factory=list)

    @property
    def records(self) -> int:
        """Records fetched."""
        return sum(len(part) for part in self.batches.values())

    @property
    def lines(self) -> list[LineEnvelope]:
        """The decoded ``chat.lines`` records."""
        return [value for _, value in self.items if isinstance(value, LineEnvelope)]

    @property
    def events(self) -> list[JobEvent]:
        """The decoded ``chat.job-events`` records."""
        return [value for _, value in self.items if isinstance(value, JobEvent)]


async def fetch(
    consumer: Any,
    *,
    wait_ms: int,
    max_records: int,
    lines_topic: str,
    events_topic: str,
    linger_ms: int = 0,
) -> Fetched:
    """Fetches one batch (``getmany``) and decodes it (:func:`decode_batch`).

    Args:
        consumer: A started ``AIOKafkaConsumer``.
        wait_ms: Longest wait for the first records, in milliseconds.
        max_records: Most records in the batch.
        lines_topic: Full ``chat.lines`` topic name.
        events_topic: Full ``chat.job-events`` topic name.
        linger_ms: Once records arrived, keep fetching for up to this long while the batch
            holds fewer than :data:`LINGER_UNTIL_RECORDS` (``getmany`` answers as soon as
            anything is there, so at a low line rate each batch would be a record or two).

    Returns:
        The batch (empty when nothing arrived within ``wait_ms``), each partition's records in
        offset order.
    """
    batches = await consumer.getmany(timeout_ms=wait_ms, max_records=max_records)
    batches = {tp: part for tp, part in batches.items() if part}
    if batches and linger_ms > 0:
        await _linger(consumer, batches, linger_ms=linger_ms, max_records=max_records)
    records = [record for part in batches.values() for record in part]
    items, dead = decode_batch(records, lines_topic=lines_topic, events_topic=events_topic)
    return Fetched(batches=batches, items=items, dead=dead)


async def _linger(consumer: Any, batches: Batches, *, linger_ms: int, max_records: int) -> None:
    """Adds what arrives within ``linger_ms`` to ``batches`` (kept in offset order)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + linger_ms / 1000
    count = sum(len(part) for part in batches.values())
    limit = min(LINGER_UNTIL_RECORDS, max_records)
    while count < limit and (left_s := deadline - loop.time()) > 0:
        more = await consumer.getmany(
            timeout_ms=max(int(left_s * 1000), 1), max_records=max_records - count
        )
        for tp, part in more.items():
            held = batches.setdefault(tp, [])
            if held:  # after a rebalance reset the position, some may be here already
                part = [record for record in part if record.offset > held[-1].offset]
            held.extend(part)
            count += len(part)


def rewind_offsets(*fetched: Fetched | None) -> dict[Any, int]:
    """Returns: per partition.

    The first offset among the given batches (where to seek so that every one of them is read
    again).
    """
    offsets: dict[Any, int] = {}
    for batch in fetched:
        if batch is None:
            continue
        for tp, part in batch.batches.items():
            first = part[0].offset
            offsets[tp] = min(first, offsets.get(tp, first))
    return offsets


class Prefetcher:
    """Fetches the next batch in a task while the current one is written (module docstring).

    Args:
        consumer: The sink's started consumer.
        fetch_batch: Fetches and decodes one batch (:func:`fetch` with the sink's settings).
    """

    def __init__(
        self, consumer: Any, fetch_batch: Callable[[], Coroutine[Any, Any, Fetched]]
    ) -> None:
        self._consumer = consumer
        self._fetch_batch = fetch_batch
        self._task: asyncio.Task[Fetched] | None = None
        self.dropped = 0
        """Records dropped from batches fetched ahead because of a rebalance."""

    def __repr__(self) -> str:
        return f"<Prefetcher pending={self._task is not None} dropped={self.dropped}>"

    @property
    def pending(self) -> bool:
        """Whether a batch is being (or has been) fetched ahead."""
        return self._task is not None

    @property
    def fetched(self) -> bool:
        """Whether the batch fetched ahead has arrived (or its fetch failed)."""
        return self._task is not None and self._task.done()

    def start(self) -> None:
        """Starts fetching the next batch (no-op when one is pending already)."""
        if self._task is None:
            self._task = asyncio.create_task(self._fetch_batch(), name="sink-prefetch")

    async def take(self) -> Fetched | None:
        """Returns: the batch fetched ahead.

        Without the records a rebalance took since (module docstring), or None when none was
        pending.

        Raises:
            Whatever the fetch raised (e.g. a Kafka error); the batch is then gone unread
            and the consumer's position is unchanged by it.
        """
        task, self._task = self._task, None
        if task is None:
            return None
        fetched = await task
        return await self._still_ours(fetched)

    async def cancel(self) -> Fetched | None:
        """Stops the fetch ahead. Returns: the batch it had fetched (for a rewind), if any."""
        task, self._task = self._task, None
        if task is None:
            return None
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            return await task
        return None

    async def _still_ours(self, fetched: Fetched) -> Fetched:
        assigned = self._consumer.assignment()
        kept: Batches = {}
        for tp, part in fetched.batches.items():
            if tp in assigned and await self._position_past(tp, part[-1].offset):
                kept[tp] = part
        if len(kept) == len(fetched.batches):
            return fetched
        gone = {
            id(record) for tp, part in fetched.batches.items() if tp not in kept for record in part
        }
        self.dropped += len(gone)
        logger.info("rebalance: %d records fetched ahead dropped, to be read again", len(gone))
        return Fetched(
            batches=kept,
            items=[item for item in fetched.items if id(item[0]) not in gone],
            dead=[dead for dead in fetched.dead if id(dead[0]) not in gone],
        )

    async def _position_past(self, tp: Any, last_offset: int) -> bool:
        try:
            return await kafka_consumer.position(self._consumer, tp) > last_offset
        except PartitionsRevokedError:
            return False
