"""The lock, as a context manager, and the lease it gives, which renews
itself in a daemon thread."""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, List, Optional, Tuple, Type

from ._errors import Error, LeaseLost, NotHolder
from ._http import transient
from ._types import Abort, AcquireGranted, Predecessor

if TYPE_CHECKING:
    from ._client import Client

log = logging.getLogger("leasekeeper")


class Lock:
    """A lock to take in a ``with`` block, from :meth:`Client.lock`:
    ``with lk.lock(...) as lease`` acquires on entry and releases on exit.
    :meth:`acquire` takes it without a block; the :class:`Lease` it returns
    must then be released."""

    name: str
    """The lock's name."""
    client: str
    """The client that acquires."""
    ttl: int
    """The lease's length, in seconds."""
    wait: int
    """How long the acquire may wait in the lock's queue, in seconds."""
    shared: bool
    """A shared lease rather than an exclusive one."""

    def __init__(self, lk: "Client", name: str, *, client: str, ttl: int, wait: int, shared: bool) -> None:
        self._lk = lk
        self.name = name
        self.client = client
        self.ttl = ttl
        self.wait = wait
        self.shared = shared
        self._lease: Optional[Lease] = None

    def __repr__(self) -> str:
        return "Lock(%r, client=%r, ttl=%d, wait=%d, shared=%r)" % (
            self.name,
            self.client,
            self.ttl,
            self.wait,
            self.shared,
        )

    def acquire(self) -> "Lease":
        """Acquires the lock (:meth:`Client.acquire` says what it raises)
        and returns the lease, which renews itself until released."""
        granted, send = self._lk._acquire(self.name, self.client, self.ttl, self.wait, self.shared)
        try:
            base, renew_now = self._confirm(granted, send)
        except LeaseLost:
            raise
        except BaseException:
            # Interrupted between the grant and its lease: give it back.
            try:
                self._lk.release(self.name, client=self.client)
            except Exception:
                pass
            raise
        return Lease(self._lk, granted, self.name, self.client, self.ttl, base, renew_now)

    def _confirm(self, granted: AcquireGranted, send: float) -> Tuple[float, bool]:
        """When the lease counts from, and whether to renew it at once.

        The server's grant happened somewhere between the acquire's send and
        its answer, so the lease is counted from the send. A grant that took
        over a second to answer came from the queue, and after a long wait,
        or a pause of the server or of this process, it may already have
        lapsed and gone to a successor: a renew tells how long it really
        has, counted from the renew's own send, and a refused renew means it
        is gone. Without an answer, the renew thread tries again at once.
        """
        if time.monotonic() - send <= 1.0:
            return send, False
        renew_send = time.monotonic()
        try:
            r = self._lk.renew(self.name, client=self.client, ttl=self.ttl)
        except Exception as e:
            if isinstance(e, Error) and not transient(e):
                raise LeaseLost(
                    self.name,
                    self.client,
                    granted["token"],
                    e,
                    False,
                    "%s was granted %s (token %d) from the queue, but the lease was gone before its answer arrived: %s"
                    % (self.client, self.name, granted["token"], e),
                ) from e
            return send, True
        granted["expires_at"] = r["expires_at"]
        return renew_send, False

    def __enter__(self) -> "Lease":
        if self._lease is not None:
            raise RuntimeError("%r is already held by this Lock object" % (self,))
        self._lease = self.acquire()
        return self._lease

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.__exit__(exc_type, exc, tb)


class Lease:
    """A granted lock that renews itself, every third of its ttl, in a
    daemon thread on a connection of its own, until released or lost.

    :attr:`lost` is set when the lease is lost: the server refused a renew
    (the lease was revoked, released from elsewhere, lapsed, or the client
    was aborted as a deadlock victim), or no renew succeeded before the
    lease may have ended (the send time of the last successful renew, or of
    the acquire, plus the ttl, less the second the server's clock rounds
    away). Work under the lock must stop then: someone else may hold it.
    Releasing does not set it.

    Its methods may be called from any thread.
    """

    token: int
    """The lease's fencing token: what the fenced store wants with a write.
    Renewing keeps it."""
    lock: str
    """The lock the lease is on."""
    client: str
    """The client that holds it."""
    ttl: int
    """The lease's length, in seconds, renewed every third of it."""
    granted_at: int
    """When the lease started, in Unix seconds of the server's clock: for a
    grant from the queue, the instant the previous lease ended."""
    predecessors: List[Predecessor]
    """The leases whose end made this grant possible, oldest end first: one
    that ``ended`` ``"lapsed"`` or ``"revoked"`` may have left its work
    half-done. Empty on a lock's first grant, or for a reader that joined
    live readers."""
    victims: List[str]
    """The clients the acquire aborted as deadlock victims; usually none."""
    aborts: List[Abort]
    """Why each of :attr:`victims` was chosen, in the same order."""
    lost: threading.Event
    """Set when the lease is lost (see the class); :attr:`error` says why."""

    def __init__(
        self, lk: "Client", granted: AcquireGranted, lock: str, client: str, ttl: int, base: float, renew_now: bool
    ) -> None:
        self._lk = lk
        self.token = granted["token"]
        self.lock = lock
        self.client = client
        self.ttl = ttl
        self.granted_at = granted["granted_at"]
        self.predecessors = list(granted.get("predecessors", []))
        self.victims = list(granted.get("victims", []))
        self.aborts = list(granted.get("aborts", []))
        self.lost = threading.Event()
        self._expires_at: int = granted["expires_at"]
        self._error: Optional[LeaseLost] = None
        self._mu = threading.Lock()
        self._stop = threading.Event()
        self._released = False
        self._thread = threading.Thread(
            target=self._keep_alive, args=(base, renew_now), name="leasekeeper-renew %s" % lock, daemon=True
        )
        self._thread.start()

    def __repr__(self) -> str:
        return "Lease(lock=%r, client=%r, token=%d, expires_at=%d%s)" % (
            self.lock,
            self.client,
            self.token,
            self.expires_at,
            ", lost" if self.lost.is_set() else "",
        )

    @property
    def expires_at(self) -> int:
        """When the lease ends unless renewed, in Unix seconds of the
        server's clock, as of its grant or its latest renew."""
        with self._mu:
            return self._expires_at

    @property
    def error(self) -> Optional[LeaseLost]:
        """None while the lease is kept; once :attr:`lost` is set, the
        :class:`LeaseLost` that says why."""
        with self._mu:
            return self._error

    def write(self, key: str, value: str) -> None:
        """Writes ``value`` under ``key`` in the lock's fenced store with the
        lease's token (:meth:`Client.write`). The store does not look at
        leases: a lost lease's write still succeeds until a successor has
        written with a higher token, then raises :class:`StaleToken`."""
        self._lk.write(self.lock, key, value, token=self.token)

    def read(self, key: str) -> Optional[str]:
        """The value last accepted under ``key`` in the lock's fenced store,
        None when there is none (:meth:`Client.read` gives its token too)."""
        return self._lk.read(self.lock, key).get("value")

    def release(self) -> None:
        """Stops renewing and releases the lease. Later calls do nothing.

        If the lease was lost, it raises :attr:`error`, a :class:`LeaseLost`
        (after releasing anyway when renewals failed, as the server may not
        have retired the lease yet). If the release gets no answer it raises
        that error, and the lease lapses at :attr:`expires_at`.
        """
        with self._mu:
            if self._released:
                return
            self._released = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        lost = self.error
        if lost is None or lost.expired:
            try:
                res = self._lk.release(self.lock, client=self.client)
            except NotHolder as e:
                if lost is None:
                    # Gone since the last renew (revoked, say): lost, not
                    # released.
                    self._lose(e, expired=False)
                    lost = self.error
            except Exception as e:
                if lost is None:
                    raise
                log.debug("releasing %s after the lease was lost: %s", self.lock, e)
            else:
                if lost is None and res.get("outcome") != "released":
                    raise Error("", "POST /v1/release: answered %r, not 'released'" % (res.get("outcome"),), 200)
        if lost is not None:
            raise lost

    def __enter__(self) -> "Lease":
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if exc_type is None:
            self.release()
            return
        # The block's own exception is what the caller must see.
        try:
            self.release()
        except Exception as e:
            log.warning("releasing %s after %s: %s", self.lock, exc_type.__name__, e)

    def _lose(self, cause: Optional[BaseException], expired: bool) -> None:
        if expired:
            msg = "%s's lease on %s (token %d) may have ended: no renew succeeded in time (%s)" % (
                self.client,
                self.lock,
                self.token,
                cause,
            )
        else:
            msg = "%s's lease on %s (token %d) was lost: the server refused a renew (%s)" % (
                self.client,
                self.lock,
                self.token,
                cause,
            )
        with self._mu:
            if self._error is None:
                self._error = LeaseLost(self.lock, self.client, self.token, cause, expired, msg)
        log.warning("%s", msg)
        self.lost.set()

    def _keep_alive(self, base: float, renew_now: bool) -> None:
        """Renews every ttl/3 from the send time of the last successful renew
        (base). The server's clock counts whole seconds, so the lease may
        end up to a second before base+ttl: ttl/3 leaves room for retries
        before then from a ttl of 2 up. After a failure that may pass (no
        answer, a 5xx) it retries every ttl/10 (0.1 s to 1 s) until
        base+ttl-1, the earliest the lease may have ended, and gives up
        then. A refusal (not holder) ends the lease at once."""
        try:
            ttl = self.ttl
            expiry = base + max(ttl - 1, 0)
            next_at = time.monotonic() if renew_now else base + ttl / 3
            retry = min(max(ttl / 10, 0.1), 1.0)
            body = {"client": self.client, "lock": self.lock, "ttl": ttl}
            while not self._stop.wait(max(next_at - time.monotonic(), 0)):
                send = time.monotonic()
                err: Optional[BaseException] = None
                try:
                    # A renew that answers after the earliest end is no use.
                    res = self._lk._transport.request(
                        "POST", "/v1/renew", body=body, timeout=min(max(expiry - send, 0.05), self._lk.timeout)
                    )
                except Exception as e:
                    err = e
                if self._stop.is_set():
                    return
                if err is None:
                    with self._mu:
                        self._expires_at = res["expires_at"]
                    expiry = send + max(ttl - 1, 0)
                    next_at = send + ttl / 3
                    continue
                if isinstance(err, Error) and not transient(err):
                    self._lose(err, expired=False)
                    return
                now = time.monotonic()
                if now >= expiry:
                    self._lose(err, expired=True)
                    return
                log.debug("renewing %s: %s; retrying", self.lock, err)
                next_at = now + min(retry, expiry - now)
        finally:
            self._lk._transport.close_local()
