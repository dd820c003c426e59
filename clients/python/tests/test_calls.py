"""The plain calls, one request each, against a real server: their
answers, and the errors they raise."""

import threading
import time
from typing import Any, Dict, List

import pytest

import support  # noqa: F401  (puts the package's folder on sys.path)

import leasekeeper
from leasekeeper import Client


def in_thread(fn: Any, *args: Any, **kwargs: Any) -> Dict[str, Any]:
    """Runs fn in a thread; the dict gets its "result" or "error", and the
    thread as "thread"."""
    out: Dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn(*args, **kwargs)
        except BaseException as e:
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    out["thread"] = t
    t.start()
    return out


def wait_queued(lk: Client, lock: str, n: int = 1) -> None:
    """Waits until lock's queue has n waiters."""
    deadline = time.monotonic() + 10
    while len(lk.inspect(lock)["queue"]) < n:
        assert time.monotonic() < deadline, "nobody queued for %s" % lock
        time.sleep(0.02)


def events_so_far(lk: Client) -> List[leasekeeper.Event]:
    """Every event of the server up to now, from its buffer: up to the
    release of a lock of its own that it takes and releases to mark now."""
    lk.acquire("events-so-far", client="events-so-far", ttl=60)
    lk.release("events-so-far", client="events-so-far")
    out: List[leasekeeper.Event] = []
    with lk.watch(last_event_id=0) as events:
        for e in events:
            if (e["kind"], e["lock"]) == ("release", "events-so-far"):
                return out
            if e["lock"] != "events-so-far":
                out.append(e)
    raise AssertionError("the event stream ended")


def test_acquire_granted(lk: Client) -> None:
    g = lk.acquire("exports/daily", client="etl-a", ttl=30)
    assert g["outcome"] == "granted"
    assert g["token"] == 1
    assert g["expires_at"] - g["granted_at"] == 30
    assert "predecessors" not in g  # a lock's first grant
    with pytest.raises(leasekeeper.ClientBusy) as busy:
        lk.acquire("exports/daily", client="etl-a", ttl=30)
    assert (busy.value.code, busy.value.status) == ("client_busy", 409)
    assert "etl-a" in busy.value.message
    lk.release("exports/daily", client="etl-a")
    g2 = lk.acquire("exports/daily", client="etl-b", ttl=30, shared=True)
    assert g2["token"] == 2
    assert [(p["client"], p["token"], p["ended"]) for p in g2["predecessors"]] == [("etl-a", 1, "released")]
    assert lk.inspect("exports/daily")["holders"][0]["mode"] == "shared"


def test_acquire_not_acquired_withdraws(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    with pytest.raises(leasekeeper.NotAcquired) as na:
        lk.acquire("exports/daily", client="etl-b", ttl=30)
    assert na.value.position == 1
    assert na.value.withdraw_error is None
    assert (na.value.lock, na.value.client) == ("exports/daily", "etl-b")
    # Withdrawn: etl-b neither waits nor is busy.
    assert lk.inspect("exports/daily")["queue"] == []
    assert lk.status("etl-b")["waiting"] is None


def test_acquire_arguments(lk: Client) -> None:
    with pytest.raises(leasekeeper.Error) as e:
        lk.acquire("exports/daily", client="etl-a", ttl=86401)
    assert type(e.value) is leasekeeper.Error
    assert (e.value.code, e.value.status) == ("invalid_ttl", 400)
    assert e.value.message == "ttl must be from 1 to 86400 seconds, got 86401"
    assert str(e.value) == "invalid_ttl: ttl must be from 1 to 86400 seconds, got 86401"
    with pytest.raises(leasekeeper.Error) as e:
        lk.acquire("exports/daily", client="etl-a", ttl=30, wait=3601)
    assert e.value.code == "invalid_arguments"
    # Whole seconds only, judged here; a float without a fraction is one.
    assert lk.acquire("exports/daily", client="etl-a", ttl=30.0)["token"] == 1
    with pytest.raises(ValueError):
        lk.acquire("exports/daily", client="etl-b", ttl=1.5)
    with pytest.raises(TypeError):
        lk.acquire("exports/daily", client="etl-b", ttl="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        lk.acquire("exports/daily", client="etl-b", ttl=True)


def test_acquire_waits_and_is_granted(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    waiter = in_thread(lk.acquire, "exports/daily", client="etl-b", ttl=30, wait=20)
    wait_queued(lk, "exports/daily")
    assert lk.release("exports/daily", client="etl-a") == {"outcome": "released"}
    waiter["thread"].join(10)
    assert waiter["result"]["token"] == 2


def test_acquire_withdrawn_by_release(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    waiter = in_thread(lk.acquire, "exports/daily", client="etl-b", ttl=30, wait=20)
    wait_queued(lk, "exports/daily")
    assert lk.release("exports/daily", client="etl-b") == {"outcome": "withdrawn"}
    waiter["thread"].join(10)
    assert isinstance(waiter["error"], leasekeeper.Withdrawn)


def test_acquire_deadlock(lk: Client) -> None:
    lk.acquire("L1", client="alice", ttl=60)
    lk.acquire("L2", client="bob", ttl=60)
    alice = in_thread(lk.acquire, "L2", client="alice", ttl=60, wait=20)
    wait_queued(lk, "L2")
    # bob is the younger: his request closes the cycle and aborts him.
    with pytest.raises(leasekeeper.Deadlock) as dl:
        lk.acquire("L1", client="bob", ttl=60, wait=20)
    assert dl.value.victims == ["bob"]
    assert dl.value.aborts[0]["victim"] == "bob"
    alice["thread"].join(10)
    assert alice["result"]["outcome"] == "granted"


def test_renew(lk: Client) -> None:
    g = lk.acquire("exports/daily", client="etl-a", ttl=30)
    r = lk.renew("exports/daily", client="etl-a", ttl=60)
    assert (r["outcome"], r["token"], r["granted_at"]) == ("renewed", 1, g["granted_at"])
    assert r["expires_at"] >= g["expires_at"] + 30
    with pytest.raises(leasekeeper.NotHolder) as nh:
        lk.renew("exports/daily", client="etl-b", ttl=30)
    assert (nh.value.code, nh.value.status) == ("not_holder", 409)


def test_release(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    assert lk.release("exports/daily", client="etl-a") == {"outcome": "released"}
    with pytest.raises(leasekeeper.NotHolder):
        lk.release("exports/daily", client="etl-a")


def test_revoke(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    assert lk.revoke("exports/daily", client="etl-a") == {"outcome": "revoked"}
    with pytest.raises(leasekeeper.NotHolder):
        lk.revoke("exports/daily", client="etl-a")
    assert [g["ended"] for g in lk.history(lock="exports/daily")] == ["revoked"]


def test_write_read(lk: Client) -> None:
    t1 = lk.acquire("exports/daily", client="etl-a", ttl=30)["token"]
    assert lk.write("exports/daily", "part-1", "rows 1-100", token=t1) == {"outcome": "ok"}
    assert lk.read("exports/daily", "part-1") == {"value": "rows 1-100", "token": 1}
    assert lk.read("exports/daily", "part-2") == {"value": None}
    lk.release("exports/daily", client="etl-a")
    t2 = lk.acquire("exports/daily", client="etl-b", ttl=30)["token"]
    lk.write("exports/daily", "part-1", "rows 1-200", token=t2)
    with pytest.raises(leasekeeper.StaleToken) as st:
        lk.write("exports/daily", "part-1", "stale rows", token=t1)
    assert (st.value.code, st.value.status) == ("stale_token", 409)
    with pytest.raises(leasekeeper.TokenNotGranted) as tng:
        lk.write("exports/daily", "part-1", "forged", token=9223372036854775807)
    assert tng.value.code == "token_not_granted"
    assert lk.read("exports/daily", "part-1")["value"] == "rows 1-200"
    # Values are text, sent and read back as such.
    lk.write("exports/daily", "ünïcode", "😀 \"quoted\" \\ \n", token=t2)
    assert lk.read("exports/daily", "ünïcode")["value"] == "😀 \"quoted\" \\ \n"


def test_inspect(lk: Client) -> None:
    assert lk.inspect("nothing/here") == {"lock": "nothing/here", "holders": [], "queue": [], "holder_count": 0, "queue_length": 0}
    lk.acquire("exports/daily", client="etl-a", ttl=30)
    waiter = in_thread(lk.acquire, "exports/daily", client="etl-b", ttl=30, wait=20)
    wait_queued(lk, "exports/daily")
    i = lk.inspect("exports/daily")
    assert [(h["client"], h["token"]) for h in i["holders"]] == [("etl-a", 1)]
    assert [(w["client"], w["position"]) for w in i["queue"]] == [("etl-b", 1)]
    lk.release("exports/daily", client="etl-a")
    waiter["thread"].join(10)


def test_status_reads_every_page(lk: Client) -> None:
    assert lk.status("nobody") == {"client": "nobody", "age": None, "holds": [], "waiting": None, "next": None}
    # More holds than the server's page of 100.
    names = ["lock-%03d" % i for i in range(105)]
    for n in names:
        lk.acquire(n, client="etl-a", ttl=60)
    s = lk.status("etl-a")
    assert [h["lock"] for h in s["holds"]] == names
    assert s["next"] is None
    assert s["age"] == 1


def test_locks_iterates_pages(lk: Client) -> None:
    assert list(lk.locks()) == []
    for n in ("a/1", "a/2", "b/1"):
        lk.acquire(n, client="c-" + n, ttl=60)
    assert [s["lock"] for s in lk.locks(page_size=1)] == ["a/1", "a/2", "b/1"]
    assert [s["lock"] for s in lk.locks("a/")] == ["a/1", "a/2"]
    assert [s["lock"] for s in lk.locks(prefix="b/", page_size=1)] == ["b/1"]
    summary = next(iter(lk.locks()))
    assert summary["holders"][0]["client"] == "c-a/1"
    assert summary["waiting"] == 0
    with pytest.raises(leasekeeper.Error) as e:
        list(lk.locks(page_size=1001))
    assert e.value.code == "invalid_arguments"


def test_history_iterates_pages(lk: Client) -> None:
    for c in ("etl-a", "etl-b", "etl-a"):
        lk.acquire("exports/daily", client=c, ttl=60)
        lk.release("exports/daily", client=c)
    grants = list(lk.history(lock="exports/daily", page_size=1))
    assert [(g["token"], g["client"], g["ended"]) for g in grants] == [
        (3, "etl-a", "released"),
        (2, "etl-b", "released"),
        (1, "etl-a", "released"),
    ]
    assert [g["token"] for g in lk.history(client="etl-a", page_size=1)] == [3, 1]
    with pytest.raises(ValueError):
        lk.history()
    with pytest.raises(ValueError):
        lk.history(lock="exports/daily", client="etl-a")


def test_health(lk: Client) -> None:
    h = lk.health()
    assert h["status"] == "ok"
    assert h["version"] == leasekeeper.__version__


def test_server_url(server: support.Server, monkeypatch: pytest.MonkeyPatch) -> None:
    host, port = server.addr.rsplit(":", 1)
    for given in (server.url, server.url + "/", server.url + "/v1", server.url + "/v1/", server.addr):
        c = Client(given)
        assert c.server == server.url
        assert c.health()["status"] == "ok"
    monkeypatch.setenv("LEASEKEEPER_SERVER", server.addr)
    assert Client().server == server.url
    assert Client().health()["status"] == "ok"
    monkeypatch.delenv("LEASEKEEPER_SERVER")
    assert Client().server == "http://127.0.0.1:7070"
    with pytest.raises(ValueError):
        Client("ftp://" + server.addr)


def test_no_server() -> None:
    # Nothing listens: the OSError of the connection, and no acquire was
    # sent (so none to withdraw).
    c = Client("127.0.0.1:9", timeout=5)
    with pytest.raises(ConnectionRefusedError):
        c.health()
    with pytest.raises(ConnectionRefusedError):
        c.acquire("exports/daily", client="etl-a", ttl=30)


def test_not_the_api(lk: Client, server: support.Server) -> None:
    # A URL with a path the server does not have: an Error without a code
    # would be a proxy's; this one is the API's not_found.
    c = Client(server.url + "/somewhere")
    with pytest.raises(leasekeeper.Error) as e:
        c.health()
    assert (e.value.status, e.value.code) == (404, "not_found")


def test_keep_alive_per_thread(lk: Client, server: support.Server) -> None:
    # Requests from several threads at once, each on its connection: the
    # answers never mix.
    errors: List[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(20):
                name = "t%d/%d" % (i, j)
                assert lk.acquire(name, client="c%d" % i, ttl=60)["token"] == 1
                assert lk.inspect(name)["holders"][0]["client"] == "c%d" % i
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_reconnects_after_server_restart(lk: Client, server: support.Server) -> None:
    # The kept-alive connection dies with the server; the next request
    # opens another.
    lk.acquire("exports/daily", client="etl-a", ttl=60)
    server.stop()
    server.start()
    assert lk.inspect("exports/daily")["holders"][0]["client"] == "etl-a"
    assert lk.release("exports/daily", client="etl-a") == {"outcome": "released"}


def test_answers_read_in_pieces() -> None:
    # Before Python 3.11, HTTPResponse.read(n) allocates n bytes at once:
    # reading an answer with the 64 MiB bound cost 0.4 s a request on 3.9.
    from leasekeeper import _http

    class Answer:
        def __init__(self, body: bytes) -> None:
            self.body = body
            self.asked: List[int] = []

        def read(self, n: int) -> bytes:
            self.asked.append(n)
            out, self.body = self.body[:n], self.body[n:]
            return out

    a = Answer(b"x" * 200000)
    assert _http.read_answer(a) == b"x" * 200000  # type: ignore[arg-type]
    assert max(a.asked) <= 1 << 16


def test_socket_timeout_exceeds_the_wait(lk: Client, server: support.Server) -> None:
    # A wait longer than the Client's timeout: the socket waits for the
    # server's answer at the end of the wait, not for the timeout alone.
    lk.acquire("exports/daily", client="etl-a", ttl=60)
    short = Client(server.url, timeout=1)
    start = time.monotonic()
    with pytest.raises(leasekeeper.NotAcquired):
        short.acquire("exports/daily", client="etl-b", ttl=30, wait=3)
    assert time.monotonic() - start >= 3


def test_error_classes_by_code() -> None:
    # unavailable (503) cannot be had from a healthy SQLite server: the
    # answer's decoding, as the server would send it.
    from leasekeeper import _http

    with pytest.raises(leasekeeper.Unavailable) as e:
        _http.decode_answer("POST", "/v1/acquire", 503, b'{"error":"unavailable","message":"db away"}', "1")
    assert (e.value.code, e.value.status, e.value.message, e.value.retry_after) == ("unavailable", 503, "db away", 1.0)
    for code, cls in [("client_busy", leasekeeper.ClientBusy), ("not_holder", leasekeeper.NotHolder),
                      ("stale_token", leasekeeper.StaleToken), ("token_not_granted", leasekeeper.TokenNotGranted),
                      ("rate_limited", leasekeeper.RateLimited), ("shutting_down", leasekeeper.Error)]:
        with pytest.raises(leasekeeper.Error) as err:
            _http.decode_answer("GET", "/v1/x", 409, ('{"error":"%s","message":"m"}' % code).encode(), None)
        assert type(err.value) is cls and err.value.code == code
    assert _http.retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date past


def test_unavailable_applied() -> None:
    # A 503 says "applied": false only when nothing happened; without it
    # (a COMMIT sent, its answer lost) the outcome is unknown.
    from leasekeeper import _http

    with pytest.raises(leasekeeper.Unavailable) as e:
        _http.decode_answer("POST", "/v1/write", 503, b'{"error":"unavailable","message":"m","applied":false}', "1")
    assert e.value.applied is False and not e.value.outcome_unknown
    with pytest.raises(leasekeeper.Unavailable) as e:
        _http.decode_answer("POST", "/v1/write", 503, b'{"error":"unavailable","message":"m"}', "1")
    assert e.value.applied is None and e.value.outcome_unknown
    with pytest.raises(leasekeeper.Error) as e:
        _http.decode_answer("POST", "/v1/write", 409, b'{"error":"stale_token","message":"m","applied":false}', None)
    assert e.value.applied is None and not e.value.outcome_unknown
    assert _http.retry_after(None) is None


def test_delete_and_store_clear(lk: Client) -> None:
    t1 = lk.acquire("scratch/py", client="etl-a", ttl=30)["token"]
    lk.write("scratch/py", "part-1", "rows 1-100", token=t1)
    lk.write("scratch/py", "part-2", "rows 101-200", token=t1)
    assert lk.delete("scratch/py", "part-1", client="etl-a", token=t1) == {"outcome": "ok", "deleted": True}
    assert lk.delete("scratch/py", "part-1", client="etl-a", token=t1) == {"outcome": "ok", "deleted": False}
    assert lk.read("scratch/py", "part-1") == {"value": None}
    lk.release("scratch/py", client="etl-a")
    t2 = lk.acquire("scratch/py", client="etl-b", ttl=30)["token"]
    lk.delete("scratch/py", "none", client="etl-b", token=t2)
    with pytest.raises(leasekeeper.StaleToken):
        lk.delete("scratch/py", "part-2", client="etl-a", token=t1)
    assert lk.store_clear("scratch/py") == {"outcome": "ok", "keys": 1, "bytes": 18}
    assert lk.read("scratch/py", "part-2") == {"value": None}
