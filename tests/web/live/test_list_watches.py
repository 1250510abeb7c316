"""A session list answers at most one `watch` per `WATCH_INTERVAL_S` on each socket: the first at once,
one sent sooner once the interval has passed, and of several sent meanwhile only the latest. Time is
the test's own: the consumer's clock and its wait are replaced, and the tests count answers."""
import asyncio

import pytest

from dag.live.session_list_consumer import WATCH_INTERVAL_S, SessionListConsumer
from dag.recording.write_path import queue_session

from .test_session_list_stream import TIMEOUT, in_thread, list_socket

pytestmark = pytest.mark.django_db(transaction=True)


class StillClock:
    """The consumer's clock: stands still unless the test (or a wait ending) moves it; counts its reads,
    one per watch received, so a test knows when the consumer has seen its watches."""

    def __init__(self):
        self.now = 1000.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = StillClock()
    monkeypatch.setattr(SessionListConsumer, "clock", staticmethod(clock))
    return clock


@pytest.fixture
def waits(monkeypatch, clock):
    """The consumer's waits for the interval: each is recorded, and ends (moving the clock on by what
    it waited) only once the test sets `waits.over`."""
    class Waits(list):
        over = asyncio.Event()

    recorded = Waits()

    async def sleep(seconds):
        recorded.append(seconds)
        await recorded.over.wait()
        clock.now += seconds

    monkeypatch.setattr(SessionListConsumer, "sleep", staticmethod(sleep))
    return recorded


async def until(condition):
    """Wait for the consumer to get as far as `condition` says (bounded, not timed)."""
    async with asyncio.timeout(TIMEOUT):
        while not condition():
            await asyncio.sleep(0.01)


async def watch(comm, *sessions):
    await comm.send_json_to({"type": "watch", "ids": [str(session.pk) for session in sessions]})


async def answered(comm) -> list[str]:
    """The ids in the next answer to a watch; row updates (a session the test queued, told through the
    channel layer whenever it delivers) may come before it, and are not answers."""
    while True:
        message = await comm.receive_json_from(timeout=TIMEOUT)
        if message["type"] != "row":
            break
    assert message["type"] == "rows"
    return [row["id"] for row in message["rows"]]


async def opened(user):
    comm = list_socket(user)
    assert (await comm.connect(timeout=TIMEOUT))[0]
    return comm


async def test_a_flood_of_watches_is_answered_once_and_by_the_latest(user, clock, waits):
    first = await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    latest = await in_thread(queue_session, user, function="wiki_agent", args={"q": 2})
    comm = await opened(user)
    await watch(comm, first)
    assert await answered(comm) == [str(first.pk)]  # the first at once
    for _ in range(50):
        await watch(comm)
    await watch(comm, latest)
    await until(lambda: clock.reads == 52)  # every watch seen, none answered yet
    waits.over.set()
    assert await answered(comm) == [str(latest.pk)]
    assert waits == [WATCH_INTERVAL_S]  # one answer was held back, for all 51 watches
    # Nothing else comes of the flood: a watch sent once the interval has passed is answered next.
    clock.now += WATCH_INTERVAL_S
    await watch(comm, first)
    assert await answered(comm) == [str(first.pk)]
    await comm.disconnect()


async def test_a_watch_sent_too_soon_is_answered_once_the_interval_has_passed(user, clock, waits):
    session = await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    comm = await opened(user)
    await watch(comm)
    assert await answered(comm) == []
    clock.now += WATCH_INTERVAL_S / 4
    await watch(comm, session)
    await until(lambda: waits)
    assert waits == [WATCH_INTERVAL_S * 3 / 4]  # the rest of the interval
    waits.over.set()
    assert await answered(comm) == [str(session.pk)]
    await comm.disconnect()


async def test_watches_an_interval_apart_are_each_answered_at_once(user, clock, waits):
    session = await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    comm = await opened(user)
    for _ in range(3):
        await watch(comm, session)
        assert await answered(comm) == [str(session.pk)]
        clock.now += WATCH_INTERVAL_S
    await comm.disconnect()
    assert waits == []


async def test_a_watch_arriving_while_an_answer_is_on_its_way_does_not_cancel_that_answer(user, clock, waits,
                                                                                         monkeypatch):
    # Watches arriving during every answer must not starve the page: an answer, once begun, is sent.
    first = await in_thread(queue_session, user, function="wiki_agent", args={"q": 1})
    second = await in_thread(queue_session, user, function="wiki_agent", args={"q": 2})
    sending, go_on = asyncio.Event(), asyncio.Event()
    send = SessionListConsumer.send_json

    async def held_send(self, content, close=False):
        if content.get("type") == "rows" and waits and not go_on.is_set():  # the delayed answer
            sending.set()
            await go_on.wait()
        return await send(self, content, close)
    monkeypatch.setattr(SessionListConsumer, "send_json", held_send)
    comm = await opened(user)
    await watch(comm)
    assert await answered(comm) == []
    await watch(comm, first)  # too soon: answered after the interval
    await until(lambda: waits)
    waits.over.set()
    await until(sending.is_set)  # that answer, with the rows of `first`, is on its way
    reads_before = clock.reads
    await watch(comm, second)
    await until(lambda: clock.reads > reads_before)  # seen meanwhile
    go_on.set()
    assert await answered(comm) == [str(first.pk)]
    assert await answered(comm) == [str(second.pk)]
    await comm.disconnect()
