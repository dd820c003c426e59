"""watch: the event stream, its filters, and its resumption with
Last-Event-ID across a cut connection and a server restart."""

import queue
import socket
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest

import support
from conftest import AnswerCheck

import leasekeeper
from leasekeeper import Client


class Reader:
    """Reads an EventStream in a thread, into a queue."""

    def __init__(self, stream: leasekeeper.EventStream) -> None:
        self.stream = stream
        self.q: "queue.Queue[Any]" = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for e in self.stream:
                self.q.put(e)
        except BaseException as e:
            self.q.put(e)
        self.q.put(None)  # the end

    def next(self, timeout: float = 10) -> Optional[Dict[str, Any]]:
        """The next event; None at the end of the stream."""
        item = self.q.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        return item

    def until(self, kind: str, lock: Optional[str] = None, timeout: float = 20) -> List[Dict[str, Any]]:
        """The events up to the first of kind (on lock), that one included."""
        out: List[Dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            e = self.next(max(deadline - time.monotonic(), 0.01))
            assert e is not None, "the stream ended; got %r" % out
            out.append(e)
            if e["kind"] == kind and (lock is None or e["lock"] == lock):
                return out

    def close(self) -> None:
        """Closes the stream from this thread, and waits for the reader's."""
        self.stream.close()
        self.thread.join(5)
        assert not self.thread.is_alive(), "close did not end the iteration"


def check_events(answers: AnswerCheck, events: Sequence[Mapping[str, Any]]) -> None:
    """The events' shapes, against the document's Event schema."""
    oa = answers.openapi
    if oa is not None:
        for e in events:
            answers.problems += ["event %r: %s" % (e, p) for p in oa.validate(oa.schema("Event"), e)]


def test_watch(lk: Client, answers: AnswerCheck) -> None:
    lk.acquire("events/demo", client="watch-demo", ttl=30)
    lk.release("events/demo", client="watch-demo")
    with lk.watch(lock="events/demo", last_event_id=0) as events:
        got = [e for _, e in zip(range(2), events)]
        assert events.last_event_id == got[-1]["id"]
    assert [(e["kind"], e["client"], e["token"], e["mode"]) for e in got] == [
        ("grant", "watch-demo", 1, "exclusive"),
        ("release", "watch-demo", 1, "exclusive"),
    ]
    check_events(answers, got)
    # From now on, filtered.
    r = Reader(lk.watch(prefix="exports/", client="etl-a"))
    time.sleep(0.5)  # the stream is open
    lk.acquire("other/x", client="etl-a", ttl=30)
    lk.acquire("exports/x", client="etl-b", ttl=30)
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    e = r.next()
    assert e is not None and (e["kind"], e["lock"], e["client"]) == ("grant", "exports/daily", "etl-a")
    check_events(answers, [e])
    r.close()


def test_watch_refused(lk: Client) -> None:
    # An empty filter is a bad request: no retry would change it.
    with pytest.raises(leasekeeper.Error) as e:
        next(iter(lk.watch(lock="")))
    assert (e.value.code, e.value.status) == ("invalid_arguments", 400)


def test_watch_close_from_another_thread(lk: Client) -> None:
    r = Reader(lk.watch())
    time.sleep(0.3)
    start = time.monotonic()
    r.close()
    assert time.monotonic() - start < 2
    assert r.next() is None


class Proxy:
    """A TCP proxy in front of the server, whose connections a test can cut."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.addr = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.conns: List[socket.socket] = []
        self.mu = threading.Lock()
        self.holding = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            with self.mu:
                holding = self.holding
            if holding:
                c.close()
                continue
            try:
                s = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            with self.mu:
                self.conns += [c, s]
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def hold(self, holding: bool) -> None:
        """While holding, new connections are closed at once."""
        with self.mu:
            self.holding = holding

    def cut(self) -> None:
        """Breaks every connection through the proxy."""
        with self.mu:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        """Stops accepting, and cuts."""
        self.listener.close()
        self.cut()


def test_watch_resumes_after_a_cut(lk: Client, server: support.Server, answers: AnswerCheck) -> None:
    proxy = Proxy(server.addr)
    try:
        r = Reader(answers.hook(Client(proxy.addr)).watch(lock="exports/daily"))
        time.sleep(0.3)
        lk.acquire("exports/daily", client="etl-a", ttl=60)
        first = r.until("grant")
        # While the stream is cut, the lock changes hands; the stream comes
        # back after the grant it saw, and the server sends what it missed.
        proxy.cut()
        lk.release("exports/daily", client="etl-a")
        lk.acquire("exports/daily", client="etl-b", ttl=60)
        missed = r.until("grant")
        assert [(e["kind"], e["client"]) for e in missed] == [("release", "etl-a"), ("grant", "etl-b")]
        assert missed[0]["id"] > first[-1]["id"]
        check_events(answers, first + missed)
        r.close()
    finally:
        proxy.close()


def test_watch_across_a_server_restart(lk: Client, server: support.Server, answers: AnswerCheck) -> None:
    proxy = Proxy(server.addr)
    try:
        r = Reader(answers.hook(Client(proxy.addr)).watch())
        time.sleep(0.3)
        lk.acquire("exports/daily", client="etl-a", ttl=60)
        before = r.until("grant")
        # The server restarts (same address, same database), and the lock
        # changes hands before the stream can come back: it comes back with
        # the last id it had, and the new server sends what came after it.
        proxy.hold(True)
        proxy.cut()
        server.stop()
        server.start()
        lk.release("exports/daily", client="etl-a")
        lk.acquire("exports/daily", client="etl-b", ttl=60)
        proxy.hold(False)
        after = r.until("grant")
        assert [(e["kind"], e["client"]) for e in after] == [("release", "etl-a"), ("grant", "etl-b")]
        assert after[0]["id"] == before[-1]["id"] + 1  # ids go on across restarts
        check_events(answers, before + after)
        r.close()
    finally:
        proxy.close()


def test_watch_reset(lk: Client, answers: AnswerCheck) -> None:
    # An id the server's buffer does not have (from another database, say):
    # a reset, from where the stream stands, then live events.
    lk.acquire("exports/daily", client="etl-a", ttl=60)
    r = Reader(lk.watch(last_event_id=1000000))
    reset = r.next()
    assert reset is not None and reset["kind"] == "reset" and reset["id"] == 1
    lk.release("exports/daily", client="etl-a")
    release = r.next()
    assert release is not None and (release["kind"], release["id"]) == ("release", 2)
    check_events(answers, [reset, release])
    r.close()
