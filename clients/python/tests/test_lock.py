"""The lock as a context manager, and its lease: renewing, losing,
releasing, withdrawing."""

import http.client
import signal
import threading
import time

import pytest

import support
from test_calls import events_so_far, in_thread, wait_queued

import leasekeeper
from leasekeeper import Client


def test_lock_gives_a_lease(lk: Client) -> None:
    with lk.lock("exports/daily", client="etl-a", ttl=30) as lease:
        assert isinstance(lease, leasekeeper.Lease)
        assert (lease.lock, lease.client, lease.token, lease.ttl) == ("exports/daily", "etl-a", 1, 30)
        assert lease.expires_at - lease.granted_at == 30
        assert lease.predecessors == []
        assert isinstance(lease.lost, threading.Event) and not lease.lost.is_set()
        assert lease.error is None
        lease.write("part-1", "rows 1-100")
        assert lease.read("part-1") == "rows 1-100"
        assert lease.read("part-2") is None
        assert lk.inspect("exports/daily")["holders"][0]["client"] == "etl-a"
    assert lk.inspect("exports/daily")["holders"] == []
    assert not lease.lost.is_set()  # released, not lost
    assert not lease._thread.is_alive()
    # The same Lock object again: a new lease, the next token.
    lock = lk.lock("exports/daily", client="etl-a", ttl=30)
    with lock as first:
        with pytest.raises(RuntimeError):
            lock.__enter__()
    with lock as second:
        assert (first.token, second.token) == (2, 3)


def test_renewing_keeps_the_lease_through_3_ttls(lk: Client) -> None:
    with lk.lock("exports/daily", client="etl-a", ttl=3) as lease:
        first_expiry = lease.expires_at
        time.sleep(10)  # three ttls and a third
        assert not lease.lost.is_set(), lease.error
        holders = lk.inspect("exports/daily")["holders"]
        assert [(h["client"], h["token"]) for h in holders] == [("etl-a", 1)]
        assert lease.expires_at >= first_expiry + 8
        lease.write("part-1", "still mine")
    grants = list(lk.history(lock="exports/daily"))
    assert [(g["token"], g["ended"]) for g in grants] == [(1, "released")]


def test_lost_within_a_ttl_after_revoke(lk: Client) -> None:
    with pytest.raises(leasekeeper.LeaseLost) as lost:
        with lk.lock("exports/daily", client="etl-a", ttl=3) as lease:
            revoked = time.monotonic()
            lk.revoke("exports/daily", client="etl-a")
            assert lease.lost.wait(3), "lost not set within the ttl"
            assert time.monotonic() - revoked < 3
            err = lease.error
            assert isinstance(err, leasekeeper.LeaseLost)
            assert isinstance(err.cause, leasekeeper.NotHolder)
            assert not err.expired
            assert err.token == 1
            lease._thread.join(1)
            assert not lease._thread.is_alive()
    # Leaving the block of a lost lease raises its loss.
    assert lost.value is err


def test_lost_found_by_the_release(lk: Client) -> None:
    # Revoked after the last renew: the release finds the lease gone.
    with pytest.raises(leasekeeper.LeaseLost) as lost:
        with lk.lock("exports/daily", client="etl-a", ttl=30) as lease:
            lk.revoke("exports/daily", client="etl-a")
    assert lease.lost.is_set()
    assert isinstance(lost.value.cause, leasekeeper.NotHolder)


def test_lost_when_renewals_fail_until_the_expiry(lk: Client, server: support.Server) -> None:
    with pytest.raises(leasekeeper.LeaseLost):
        with lk.lock("exports/daily", client="etl-a", ttl=3) as lease:
            server.pause()  # renews get no answer
            try:
                paused = time.monotonic()
                assert lease.lost.wait(4), "lost not set when the lease may have ended"
                # Lost at the earliest end, the last renew's send + ttl - 1 s:
                # within a ttl.
                assert time.monotonic() - paused < 3
                assert lease.error is not None and lease.error.expired
            finally:
                server.resume()
    # The release was sent anyway, the server not having retired the lease.
    assert lk.inspect("exports/daily")["holders"] == []


def test_release_on_an_exception(lk: Client) -> None:
    with pytest.raises(ZeroDivisionError):
        with lk.lock("exports/daily", client="etl-a", ttl=30) as lease:
            1 / 0
    assert lk.inspect("exports/daily")["holders"] == []
    assert [g["ended"] for g in lk.history(lock="exports/daily")] == ["released"]
    assert not lease._thread.is_alive()


def test_exception_wins_over_a_lost_lease(lk: Client) -> None:
    # The block's own exception is what the caller sees, not the loss.
    with pytest.raises(KeyError):
        with lk.lock("exports/daily", client="etl-a", ttl=3) as lease:
            lk.revoke("exports/daily", client="etl-a")
            assert lease.lost.wait(3)
            raise KeyError("mine")


def test_release_by_hand(lk: Client) -> None:
    lease = lk.lock("exports/daily", client="etl-a", ttl=30).acquire()
    assert lk.inspect("exports/daily")["holders"][0]["token"] == lease.token
    lease.release()
    lease.release()  # nothing more
    assert lk.inspect("exports/daily")["holders"] == []
    assert not lease.lost.is_set()


def test_withdraw_after_the_wait_runs_out(lk: Client) -> None:
    with lk.lock("exports/daily", client="etl-a", ttl=30):
        start = time.monotonic()
        with pytest.raises(leasekeeper.NotAcquired) as na:
            with lk.lock("exports/daily", client="etl-b", ttl=30, wait=1):
                pytest.fail("etl-b got the lock while etl-a held it")
        assert time.monotonic() - start >= 1
        assert na.value.position == 1
        assert na.value.withdraw_error is None
        # Not left queued: the request was withdrawn.
        assert lk.inspect("exports/daily")["queue"] == []
        assert lk.status("etl-b")["waiting"] is None
        assert ("withdraw", "etl-b") in [(e["kind"], e["client"]) for e in events_so_far(lk)]


def test_grant_from_the_queue_is_confirmed(lk: Client) -> None:
    # etl-a's lease is not renewed: it lapses after 2 s, and etl-b, waiting,
    # is granted it. The grant took over a second to answer, so the lease
    # renews at once to learn how long it really has.
    lk.acquire("exports/daily", client="etl-a", ttl=2)
    with lk.lock("exports/daily", client="etl-b", ttl=30, wait=20) as lease:
        assert lease.token == 2
        assert [(p["client"], p["ended"]) for p in lease.predecessors] == [("etl-a", "lapsed")]
        assert not lease.lost.is_set()
        # The renew that confirmed the grant, long before the first of the
        # renew thread's, due 10 s after it.
        kinds = [(e["kind"], e["client"]) for e in events_so_far(lk)]
        assert kinds[kinds.index(("grant", "etl-b")) + 1] == ("renew", "etl-b")


def test_unknown_outcome_is_withdrawn(lk: Client, server: support.Server) -> None:
    # The server dies during etl-b's wait, and comes back: the acquire had
    # no answer, so the request is withdrawn once the server answers again.
    lk.acquire("exports/daily", client="etl-a", ttl=60)
    waiter = in_thread(lk.acquire, "exports/daily", client="etl-b", ttl=30, wait=30)
    wait_queued(lk, "exports/daily")
    server.kill()
    restart = threading.Timer(1.0, server.start)
    restart.start()
    waiter["thread"].join(30)
    restart.join()  # before any failure, so that the test's end stops it
    err = waiter.get("error")
    assert isinstance(err, leasekeeper.UnknownOutcome), waiter
    assert err.withdraw_error is None
    assert isinstance(err.cause, (OSError, http.client.HTTPException))
    assert err.__cause__ is err.cause
    assert lk.status("etl-b")["waiting"] is None
    assert lk.inspect("exports/daily")["queue"] == []


def test_interrupted_wait_is_withdrawn(lk: Client) -> None:
    lk.acquire("exports/daily", client="etl-a", ttl=60)
    main = threading.main_thread().ident
    assert main is not None and threading.get_ident() == main
    # Python keeps SIGINT ignored when its launcher ignored it (a
    # background job of a shell without job control): give it Python's
    # own handler for the test, as in a terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lk.acquire("exports/daily", client="etl-b", ttl=30, wait=20)
    finally:
        # An acquire that returned early must not leave the signal to
        # interrupt pytest itself.
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGINT, previous)
    assert lk.status("etl-b")["waiting"] is None
    assert lk.inspect("exports/daily")["queue"] == []


def test_leases_in_threads(lk: Client) -> None:
    # Two leases of one Client, each renewed by its thread, each released
    # by the thread that took it.
    results = {}

    def hold(name: str) -> None:
        with lk.lock(name, client="c-" + name, ttl=3) as lease:
            time.sleep(4)
            results[name] = (lease.token, lease.lost.is_set())

    threads = [threading.Thread(target=hold, args=(n,)) for n in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"x": (1, False), "y": (1, False)}
    assert list(lk.locks()) == []
