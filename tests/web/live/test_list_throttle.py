"""Row updates of the live session list are coalesced per session: at most one per interval, the changes
in between carried by one trailing update, and a run's end always sent at once. Decided on an injected
clock, so nothing here sleeps or depends on the machine's speed."""
from dag.live.list_throttle import SEND_NOW, Coalescer
from dag.live.session_list_notify import ListNotifier, ends_run, owner_group


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def node_message(rev):
    return {"type": "node", "rev": rev, "node": {"id": rev, "status": "running"}}


def session_message(rev, status):
    return {"type": "session", "rev": rev, "session": {"id": "s", "status": status}}


def test_a_burst_sends_once_now_and_once_at_the_end_of_the_interval():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    decisions = []
    for step in range(10_000):  # ten thousand changes within 0.2 s
        clock.now = 100.0 + step * 0.00002
        decisions.append(coalescer.offer("s"))
    assert decisions[0] == SEND_NOW
    assert abs(decisions[1] - (0.25 - 0.00002)) < 1e-9  # one trailing update, due at 100.25
    assert decisions[2:] == [None] * 9_998
    clock.now = 100.25
    assert coalescer.take("s") is True
    assert coalescer.take("s") is False  # taken once


def test_steady_changes_go_out_once_per_interval():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    sent, due = [], None
    for step in range(101):  # a change every 10 ms for a second
        clock.now = 100.0 + step * 0.01
        if due is not None and clock.now >= due and coalescer.take("s"):
            sent.append(round(clock.now, 2))
            due = None
        decision = coalescer.offer("s")
        if decision == SEND_NOW:
            sent.append(round(clock.now, 2))
        elif decision is not None:
            due = clock.now + decision
    assert sent == [100.0, 100.25, 100.5, 100.75, 101.0]


def test_the_end_of_a_run_is_sent_at_once_and_cancels_the_trailing_update():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    assert coalescer.offer("s") == SEND_NOW
    clock.now += 0.01
    assert coalescer.offer("s") > 0
    clock.now += 0.01
    assert coalescer.offer("s", final=True) == SEND_NOW
    clock.now += 0.25
    assert coalescer.take("s") is False  # the final update already carried everything


def test_sessions_are_throttled_independently():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    assert coalescer.offer("a") == SEND_NOW
    assert coalescer.offer("b") == SEND_NOW
    assert coalescer.offer("a") > 0 and coalescer.offer("b") > 0


def test_a_trailing_update_that_never_fired_does_not_silence_the_session():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    coalescer.offer("s")
    clock.now += 0.1
    assert coalescer.offer("s") > 0  # scheduled, but its event loop went away
    clock.now += 1.0
    assert coalescer.offer("s") == SEND_NOW


def test_idle_keys_are_forgotten():
    clock = FakeClock()
    coalescer = Coalescer(0.25, clock)
    for key in range(5_000):
        coalescer.offer(key)
        clock.now += 0.001
    assert len(coalescer._sent_at) <= 1_001


def test_ends_run_is_a_terminal_session_message():
    assert ends_run([node_message(1), session_message(2, "completed")])
    assert not ends_run([node_message(1), session_message(2, "running")])
    assert not ends_run([node_message(1)])


class RecordingNotifier(ListNotifier):
    """The notifier with the event loop and the layer replaced by lists and the fake clock."""

    def __init__(self, clock):
        super().__init__(interval_s=0.25, clock=clock, owner_of=lambda session_id: 7)
        self.sent, self.scheduled = [], []

    def loop(self):
        return "loop"

    def schedule(self, loop, delay, callback):
        self.scheduled.append((self._clock() + delay, callback))

    def send(self, loop, owner, session_id):
        self.sent.append((round(self._clock(), 3), owner_group(owner), session_id))

    def run_due(self):
        for due, callback in [item for item in self.scheduled if item[0] <= self._clock()]:
            self.scheduled.remove((due, callback))
            callback()


def test_a_ten_thousand_node_run_sends_a_handful_of_list_notifications():
    clock = FakeClock()
    notifier = RecordingNotifier(clock)
    notifier.notify("s", [session_message(1, "running")])
    for rev in range(2, 10_002):  # 10,000 node writes over 2 s
        clock.now += 0.0002
        notifier.run_due()
        notifier.notify("s", [node_message(rev)])
    clock.now += 0.01
    notifier.notify("s", [session_message(10_002, "completed")])
    clock.now += 1
    notifier.run_due()
    times = [when for when, _, _ in notifier.sent]
    assert times == [100.0, 100.25, 100.5, 100.75, 101.0, 101.25, 101.5, 101.75, 102.0, 102.01]
    assert {group for _, group, _ in notifier.sent} == {"dag-owner-7"}


def test_no_listener_in_this_process_means_nothing_is_tracked():
    clock = FakeClock()
    notifier = RecordingNotifier(clock)
    notifier.loop = lambda: None
    notifier.notify("s", [node_message(1)])
    assert notifier.sent == [] and notifier.coalescer._sent_at == {}
