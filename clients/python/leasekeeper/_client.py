"""The Client: one object per server, with the API's calls."""

from __future__ import annotations

import http.client
import time
from typing import Any, Dict, Iterator, Optional, Tuple, Union, cast

from ._errors import Deadlock, Error, NotAcquired, NotHolder, RateLimited, UnknownOutcome, Withdrawn
from ._http import Transport, Unsent, resolve, transient
from ._lease import Lock
from ._types import (
    AcquireGranted,
    GrantRecord,
    HealthResult,
    InspectResult,
    LockSummary,
    OutcomeResult,
    ReadResult,
    RenewResult,
    StatusResult,
)
from ._watch import EventStream

# Each release that withdraws a request is bounded so that a server that took
# the connection and then hung does not use up the time left for retries.
WITHDRAW_ATTEMPT = 5.0


def seconds(name: str, value: Union[int, float]) -> int:
    """The API's whole seconds of an argument: an int, or a float without a
    fraction. The server judges the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a whole number of seconds, got %r" % (name, value))
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("%s must be a whole number of seconds, got %r" % (name, value))
        return int(value)
    return value


class Client:
    """A client of one leasekeeper server (docs/api.md).

    ``server`` is the server's URL (``"http://127.0.0.1:7070"``,
    ``"https://locks.example:7070"``), else ``$LEASEKEEPER_SERVER``, else
    ``http://127.0.0.1:7070``; a bare ``host:port`` gets ``http://``, or
    ``https://`` with a CA file. ``auth_token`` is the bearer token for a
    server with an auth file, else ``$LEASEKEEPER_AUTH_TOKEN``. ``ca_file``
    is a PEM file of the certificate authorities to trust for an https
    server instead of the system's, else ``$LEASEKEEPER_CA_FILE`` (ignored
    for an http server). These are the CLI's (docs/cli.md).

    ``timeout`` is the socket timeout of every request, in seconds; an
    acquire with a wait gets the wait on top. A request that gets no answer
    raises an :class:`OSError`; an error answer raises :class:`Error`.

    A Client may be shared between threads: each thread talks to the server
    on a keep-alive connection of its own.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        *,
        auth_token: Optional[str] = None,
        ca_file: Optional[str] = None,
        timeout: float = 30.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive, got %r" % (timeout,))
        url, token, context = resolve(server, auth_token, ca_file)
        self._transport = Transport(url, token, context, float(timeout))

    @property
    def server(self) -> str:
        """The server's root URL, without a trailing slash or ``/v1``."""
        return self._transport.url

    @property
    def timeout(self) -> float:
        """The socket timeout of each request, in seconds."""
        return self._transport.timeout

    def __repr__(self) -> str:
        return "Client(%r)" % self._transport.url

    def close(self) -> None:
        """Closes the connections the Client keeps open. It may still be
        used: a request opens a new one. Release the leases first."""
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # The lock.

    def lock(
        self, name: str, *, client: str, ttl: Union[int, float], wait: Union[int, float] = 0, shared: bool = False
    ) -> Lock:
        """A lock to hold in a ``with`` block, as ``client`` with a lease of
        ``ttl`` seconds (shared or exclusive):

        - on entry, it acquires, waiting up to ``wait`` seconds in the
          lock's queue, and gives the :class:`Lease`;
        - while the block runs, a daemon thread renews the lease every third
          of the ttl, on its own connection, and sets ``lease.lost`` if the
          lease is lost;
        - on exit, also on an exception, it stops renewing and releases.

        An acquire whose wait ran out raises :class:`NotAcquired` once the
        request is withdrawn; see :meth:`acquire` for the rest. ``ttl`` must
        be 2 or more, as renewing takes time.
        """
        return Lock(self, name, client=client, ttl=seconds("ttl", ttl), wait=seconds("wait", wait), shared=shared)

    # Several locks at once (lock_all, after the Go client's AcquireAll)
    # belong here, beside lock: not built yet.

    # The plain calls: one request each (the pages of a listing aside).

    def acquire(
        self, lock: str, *, client: str, ttl: Union[int, float], wait: Union[int, float] = 0, shared: bool = False
    ) -> AcquireGranted:
        """Acquires ``lock`` for ``client`` and returns the grant,
        ``{"outcome": "granted", "token": ..., "granted_at": ...,
        "expires_at": ...}``. Nothing renews the lease: :meth:`lock` does.

        With ``wait`` > 0, the server holds the request up to ``wait``
        seconds while the client is queued. When the lock is not granted:

        - :class:`NotAcquired`: still queued when the wait ran out (at once
          without a wait); the request has been withdrawn, as ``leasekeeper
          exec`` does, so that the client is not left queued;
        - :class:`Deadlock`: the client was aborted as a deadlock victim;
        - :class:`Withdrawn`: a release from elsewhere withdrew the request;
        - :class:`Error` for an error answer (:class:`ClientBusy`,
          ``invalid_ttl``, ...); :class:`RateLimited` once retrying after its
          ``retry_after`` would go past the wait;
        - :class:`OSError` when the request never left (the connection was
          refused, the certificate not trusted): nothing was queued;
        - the :class:`Error` of a 5xx answer that said ``"applied": false``
          (the server stopping, or its database away): nothing happened;
        - :class:`UnknownOutcome` when the request may have reached the
          server but no answer said what became of it (a 5xx answer without
          ``"applied": false`` included); it is withdrawn first.

        Interrupted during the wait (``KeyboardInterrupt``), it withdraws
        the request before the interrupt goes on.
        """
        granted, _ = self._acquire(lock, client, seconds("ttl", ttl), seconds("wait", wait), shared)
        return granted

    def _acquire(self, lock: str, client: str, ttl: int, wait: int, shared: bool) -> Tuple[AcquireGranted, float]:
        """The acquire, and the monotonic time its request was sent."""
        body: Dict[str, Any] = {"client": client, "lock": lock, "ttl": ttl, "mode": "shared" if shared else "exclusive"}
        withdraw_for = max(wait + ttl, 1)
        start = time.monotonic()
        ask = wait
        while True:
            if ask > 0:
                body["wait"] = ask
            else:
                body.pop("wait", None)
            send = time.monotonic()
            try:
                res = self._transport.request(
                    "POST", "/v1/acquire", body=body, timeout=self._transport.timeout + ask, mark_unsent=True
                )
            except Unsent as e:
                raise e.cause from None
            except RateLimited as e:
                # Refused before anything happened: try again after the
                # server's delay, asking for what is left of the wait.
                delay = e.retry_after if e.retry_after is not None else 1.0
                if time.monotonic() + delay > start + wait:
                    raise
                time.sleep(delay)
                ask = max(int(wait - (time.monotonic() - start)), 0)
                continue
            except Error as e:
                if 400 <= e.status < 500 or not e.outcome_unknown:
                    raise  # an answer, or a 5xx saying nothing happened
                raise UnknownOutcome(lock, client, e, self._withdraw(lock, client, withdraw_for)) from e
            except (OSError, http.client.HTTPException) as e:
                raise UnknownOutcome(lock, client, e, self._withdraw(lock, client, withdraw_for)) from e
            except BaseException:
                # Interrupted while the request may be queued, or granted.
                self._withdraw(lock, client, withdraw_for)
                raise
            outcome = res.get("outcome")
            if outcome == "granted":
                return cast(AcquireGranted, res), send
            if outcome == "queued":
                werr = self._withdraw(lock, client, withdraw_for)
                raise NotAcquired(lock, client, res.get("position", 0), res.get("victims"), werr)
            if outcome == "deadlock":
                raise Deadlock(lock, client, res.get("victims", []), res.get("aborts"))
            if outcome == "withdrawn":
                raise Withdrawn(lock, client)
            raise Error("", "POST /v1/acquire: unexpected outcome %r" % (outcome,), 200)

    def _withdraw(self, lock: str, client: str, within: float) -> Optional[BaseException]:
        """Releases client's request on lock after an acquire whose outcome
        is unknown or unwanted: a request left queued would be granted a
        lease that nobody renews, and keep the client busy until it lapsed.
        While no answer comes (the server down, restarting, or answering
        5xx) it sends the release again, backing off from 0.1 s to 1 s, for
        up to ``within`` seconds. Returns None once the server said the
        client neither holds nor waits for lock, else the last error."""
        deadline = time.monotonic() + within
        backoff = 0.1
        body = {"client": client, "lock": lock}
        while True:
            # Each release gets a second at least, however little is left.
            t = min(max(deadline - time.monotonic(), 1.0), WITHDRAW_ATTEMPT)
            try:
                self._transport.request("POST", "/v1/release", body=body, timeout=t)
                return None
            except NotHolder:
                return None
            except Exception as e:
                if not transient(e):
                    return e  # a refusal that a retry would meet again
                err: BaseException = e
            pause = min(backoff, deadline - time.monotonic())
            if pause <= 0:
                return err
            time.sleep(pause)
            backoff = min(2 * backoff, 1.0)

    def renew(self, lock: str, *, client: str, ttl: Union[int, float]) -> RenewResult:
        """Renews ``client``'s lease on ``lock`` to end ``ttl`` seconds from
        now (it may shorten it): ``{"outcome": "renewed", "token": ...,
        "granted_at": ..., "expires_at": ...}``. :class:`NotHolder` when the
        client holds no live lease on the lock."""
        body = {"client": client, "lock": lock, "ttl": seconds("ttl", ttl)}
        return cast(RenewResult, self._transport.request("POST", "/v1/renew", body=body))

    def release(self, lock: str, *, client: str) -> OutcomeResult:
        """Ends ``client``'s lease on ``lock`` (``{"outcome":
        "released"}``), or withdraws its queued request (``{"outcome":
        "withdrawn"}``). :class:`NotHolder` when it neither holds nor waits
        for the lock."""
        return cast(OutcomeResult, self._transport.request("POST", "/v1/release", body={"client": client, "lock": lock}))

    def revoke(self, lock: str, *, client: str) -> OutcomeResult:
        """Ends ``client``'s live lease on ``lock`` now, as its release
        would (``{"outcome": "revoked"}``): the lock goes to the next in
        line, whose higher token fences the revoked holder out of the store.
        With an auth file, only admins may revoke. :class:`NotHolder` when
        the client holds no live lease on the lock."""
        return cast(OutcomeResult, self._transport.request("POST", "/v1/revoke", body={"client": client, "lock": lock}))

    def write(self, lock: str, key: str, value: str, *, token: int) -> OutcomeResult:
        """Writes ``value`` under ``key`` in ``lock``'s fenced store, with a
        lease's fencing ``token`` (``{"outcome": "ok"}``).
        :class:`StaleToken` when the store accepted a higher token for the
        lock, :class:`TokenNotGranted` for a token never granted for it;
        :class:`Error` ``quota_exceeded`` beyond the server's quota."""
        body = {"lock": lock, "key": key, "value": value, "token": token}
        return cast(OutcomeResult, self._transport.request("POST", "/v1/write", body=body))

    def delete(self, lock: str, key: str, *, client: str, token: int) -> Dict[str, Any]:
        """Removes ``key`` from ``lock``'s fenced store as ``client``, with
        its fencing ``token``, fenced as :meth:`write` is
        (``{"outcome": "ok", "deleted": True}``, ``False`` when the key had
        no value). :class:`StaleToken` when the store accepted a higher token
        for the lock, :class:`TokenNotGranted` for a token not granted to
        ``client`` for it."""
        body = {"client": client, "lock": lock, "key": key, "token": token}
        return cast(Dict[str, Any], self._transport.request("POST", "/v1/delete", body=body))

    def store_clear(self, lock: str) -> Dict[str, Any]:
        """Removes every key of ``lock``'s fenced store, whoever wrote it,
        and keeps its fence (``{"outcome": "ok", "keys": n, "bytes": m}``):
        an administrator's clean-up; with an auth file, admins only."""
        return cast(Dict[str, Any], self._transport.request("POST", "/v1/store/clear", body={"lock": lock}))

    def read(self, lock: str, key: str) -> ReadResult:
        """The value last accepted under ``key`` in ``lock``'s fenced store
        and the token of the write that stored it, ``{"value": ...,
        "token": ...}``; ``{"value": None}`` when there is none."""
        return cast(ReadResult, self._transport.request("GET", "/v1/read", query={"lock": lock, "key": key}))

    def inspect(self, lock: str) -> InspectResult:
        """``lock``'s holders, by token, and its queue, oldest first, with
        ``holder_count`` and ``queue_length``. It reads the server's pages
        to the last, 1,000 entries each."""
        query: Dict[str, Any] = {"lock": lock, "limit": 1000}
        res = self._transport.request("GET", "/v1/inspect", query=query)
        while res.get("next") is not None:
            page = self._transport.request("GET", "/v1/inspect", query=dict(query, after=res["next"]))
            res["holders"].extend(page["holders"])
            res["queue"].extend(page["queue"])
            res["next"] = page.get("next")
        res.pop("next", None)
        return cast(InspectResult, res)

    def status(self, client: str) -> StatusResult:
        """What ``client`` holds, by lock name, and the lock it waits for:
        ``{"client", "age", "holds", "waiting", "next"}``. It reads the
        server's pages of holds to the last, so ``next`` is None; ``age``
        and ``waiting`` are the first page's."""
        res = self._transport.request("GET", "/v1/status", query={"client": client})
        while res.get("next") is not None:
            page = self._transport.request("GET", "/v1/status", query={"client": client, "after": res["next"]})
            res["holds"].extend(page["holds"])
            res["next"] = page["next"]
        return cast(StatusResult, res)

    def locks(self, prefix: Optional[str] = None, *, page_size: Optional[int] = None) -> Iterator[LockSummary]:
        """Every lock that has holders or waiters (whose name starts with
        ``prefix``, if given), by name: an iterator that reads the server's
        pages (``page_size`` locks each, the server's 100 by default) as it
        goes. A listing of a busy server is not a snapshot: each page is
        read at its own time."""
        query: Dict[str, Any] = {"prefix": prefix, "limit": page_size}
        return self._pages("/v1/locks", query, "locks", "after")

    def history(
        self, lock: Optional[str] = None, client: Optional[str] = None, *, page_size: Optional[int] = None
    ) -> Iterator[GrantRecord]:
        """The grant history of ``lock`` or of ``client`` (give exactly one),
        newest first: who held each token, and how each lease ended. An
        iterator that reads the server's pages as it goes."""
        if (lock is None) == (client is None):
            raise ValueError("history takes exactly one of lock and client")
        query: Dict[str, Any] = {"lock": lock, "client": client, "limit": page_size}
        return self._pages("/v1/history", query, "grants", "before")

    def _pages(self, path: str, query: Dict[str, Any], items: str, cursor: str) -> Iterator[Any]:
        while True:
            page = self._transport.request("GET", path, query=query)
            for item in page[items]:
                yield item
            if page.get("next") is None:
                return
            query = dict(query, **{cursor: page["next"]})

    def watch(
        self,
        lock: Optional[str] = None,
        prefix: Optional[str] = None,
        client: Optional[str] = None,
        *,
        last_event_id: Optional[int] = None,
    ) -> EventStream:
        """The events of ``GET /v1/events`` (docs/api.md) that the filters
        select (``lock`` exact, ``prefix`` of lock names, ``client``; all
        given must match), from now on, or after ``last_event_id``: an
        iterator of :class:`Event` dicts, in commit order, that goes on
        until closed.

        When the stream is cut (the network, a server restart, nothing heard
        for 45 seconds) it reconnects by itself, with ``Last-Event-ID``, so
        that the server sends the events missed meanwhile from its buffer;
        when it no longer has them, the next event is a ``reset``: read the
        state again. An answer a retry cannot change (400, 401, 403, 404)
        raises :class:`Error`. The stream has a connection of its own.
        """
        return EventStream(self._transport, {"lock": lock, "prefix": prefix, "client": client}, last_event_id)

    def health(self) -> HealthResult:
        """The server's health, ``{"status": "ok", "clock": ..., "version":
        ...}``: it answers while the process lives, without a token."""
        return cast(HealthResult, self._transport.request("GET", "/v1/health"))
