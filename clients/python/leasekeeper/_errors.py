"""The exceptions of the leasekeeper client.

Two families: :class:`Error` is an error answer of the server (it carries
the API's code, docs/api.md); the others say why an acquire did not end
with a lease, or why a lease ended. A request that got no answer at all
raises the standard library's :class:`OSError` (``ConnectionRefusedError``,
``socket.timeout``, ``ssl.SSLCertVerificationError``, ...).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Type

from ._types import Abort


class Error(Exception):
    """An error answer of the server: the API's error object
    ``{"error": code, "message": ...}`` with its HTTP status.

    Branch on the subclass (:class:`NotHolder`, :class:`StaleToken`, ...)
    or on :attr:`code`; :attr:`message` is for people, and its wording may
    change. An answer that is not the API's (a proxy's page, a wrong URL)
    has an empty :attr:`code`, and :attr:`message` says what came.
    """

    code: str
    """The API's snake_case code: ``"not_holder"``, ``"invalid_ttl"``, ...;
    ``""`` for an answer that is not the API's."""

    status: int
    """The answer's HTTP status (409 for ``not_holder``, ...)."""

    message: str
    """What was wrong, naming the field, for people."""

    retry_after: Optional[float]
    """The answer's ``Retry-After``, in seconds; None when it has none.
    Answers 429 and 503 carry it."""

    applied: Optional[bool]
    """False when a 5xx answer said ``"applied": false``: the server's word
    that the operation did not happen (its COMMIT was never sent), so that
    a retry is safe. None otherwise: on a 5xx answer without it, the
    operation may have happened (:attr:`outcome_unknown`)."""

    def __init__(
        self, code: str, message: str, status: int, retry_after: Optional[float] = None, applied: Optional[bool] = None
    ) -> None:
        super().__init__(code, message, status, retry_after)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.applied = False if applied is False and status >= 500 else None

    @property
    def outcome_unknown(self) -> bool:
        """Whether the operation may have happened: a 5xx answer that did
        not say ``"applied": false`` (read the state before retrying)."""
        return self.status >= 500 and self.applied is not False

    def __str__(self) -> str:
        if not self.code:
            return "%s (HTTP %d)" % (self.message, self.status)
        return "%s: %s" % (self.code, self.message)


class ClientBusy(Error):
    """``client_busy`` (409): an acquire by a client that already waits for
    a lock (any lock), or already holds this one."""


class NotHolder(Error):
    """``not_holder`` (409): renew or revoke for a client without a live
    lease on the lock; release for a client that neither holds nor waits
    for it."""


class StaleToken(Error):
    """``stale_token`` (409): a write with a token below the highest the
    fenced store accepted for the lock: a successor has written."""


class TokenNotGranted(Error):
    """``token_not_granted`` (409): a write with a token never granted for
    the lock (or, with an auth file, granted to a client id the principal
    may not act as). Nothing was stored."""


class RateLimited(Error):
    """``rate_limited`` (429): the principal is over its request rate, or
    over its blocked acquires. Nothing changed: send the request again
    after :attr:`retry_after` seconds."""

    retry_after: Optional[float]
    """Seconds to wait before sending the request again (at least 1)."""


class Unavailable(Error):
    """``unavailable`` (503): the server's database is unreachable or failing
    over (PostgreSQL), or its file could not be written (SQLite). The
    operation did not happen when :attr:`applied` is False; otherwise its
    commit was cut off and it may have (:attr:`outcome_unknown`): read the
    state before acting on a retry's answer."""


_BY_CODE: Dict[str, Type[Error]] = {
    "client_busy": ClientBusy,
    "not_holder": NotHolder,
    "stale_token": StaleToken,
    "token_not_granted": TokenNotGranted,
    "rate_limited": RateLimited,
    "unavailable": Unavailable,
}


def error_for(
    code: str, message: str, status: int, retry_after: Optional[float] = None, applied: Optional[bool] = None
) -> Error:
    """The :class:`Error` of an answer: the subclass of its code, if it has
    one."""
    return _BY_CODE.get(code, Error)(code, message, status, retry_after, applied)


class NotAcquired(Exception):
    """The acquire's wait ran out (at once with ``wait=0``) while the client
    was still queued, at :attr:`position`.

    The client has withdrawn the request by then (as ``leasekeeper exec``
    does), so that it is not left queued for a lease nobody would renew:
    :attr:`withdraw_error` is None when the server confirmed it.
    """

    lock: str
    """The lock asked for."""
    client: str
    """The client that asked."""
    position: int
    """The client's rank in the lock's queue when the wait ran out; 1 is
    next in line."""
    victims: List[str]
    """Clients the request aborted as deadlock victims; usually none."""
    withdraw_error: Optional[BaseException]
    """None when the server confirmed the withdraw; else the last error of
    the releases sent to withdraw the request: the client may stay queued
    until a release withdraws it."""

    def __init__(
        self,
        lock: str,
        client: str,
        position: int,
        victims: Optional[List[str]] = None,
        withdraw_error: Optional[BaseException] = None,
    ) -> None:
        msg = "%s not acquired by %s: still queued at position %d" % (lock, client, position)
        if withdraw_error is not None:
            msg += ", and withdrawing the request failed (%s): the client may stay queued until released" % (
                withdraw_error,
            )
        super().__init__(msg)
        self.lock = lock
        self.client = client
        self.position = position
        self.victims = list(victims or [])
        self.withdraw_error = withdraw_error


class Deadlock(Exception):
    """The client was aborted as a deadlock victim, by its own acquire or,
    during the wait, by another client's (docs/contract.md, D4): it no
    longer holds any lock."""

    lock: str
    """The lock asked for."""
    client: str
    """The client that asked, and was aborted."""
    victims: List[str]
    """The clients aborted, in abort order."""
    aborts: List[Abort]
    """Why each of :attr:`victims` was chosen, in the same order (when the
    server says)."""

    def __init__(self, lock: str, client: str, victims: List[str], aborts: Optional[List[Abort]] = None) -> None:
        super().__init__(
            "%s aborted as a deadlock victim while acquiring %s (victims: %s)" % (client, lock, ", ".join(victims))
        )
        self.lock = lock
        self.client = client
        self.victims = list(victims)
        self.aborts = list(aborts or [])


class Withdrawn(Exception):
    """A release from elsewhere withdrew the client's queued request while
    its acquire waited."""

    lock: str
    """The lock asked for."""
    client: str
    """The client whose request was withdrawn."""

    def __init__(self, lock: str, client: str) -> None:
        super().__init__("%s's request for %s was withdrawn while it waited" % (client, lock))
        self.lock = lock
        self.client = client


class UnknownOutcome(Exception):
    """An acquire's request may have reached the server, but no answer told
    what became of it: the connection broke (the server died during the
    wait, say), the socket timed out, or the server answered 5xx without
    ``"applied": false`` (:class:`Unavailable`, ...) or something that is
    not the API's.

    The request may have left the client queued, or granted it a lease
    nobody renews, so the client withdraws it first, sending a release again
    while no answer comes (for up to the wait plus the ttl). :attr:`cause`
    is the acquire's own error, also chained as ``__cause__``.
    """

    lock: str
    """The lock asked for."""
    client: str
    """The client that asked."""
    cause: BaseException
    """Why the outcome is unknown: an :class:`Error` (5xx), or an
    :class:`OSError`."""
    withdraw_error: Optional[BaseException]
    """None when the server confirmed that the client neither holds nor
    waits for the lock; else the last error of the releases sent: the client
    may stay queued until a release withdraws it."""

    def __init__(
        self, lock: str, client: str, cause: BaseException, withdraw_error: Optional[BaseException] = None
    ) -> None:
        if withdraw_error is None:
            msg = "no answer to %s's acquire of %s (%s); the request was withdrawn" % (client, lock, cause)
        else:
            msg = "no answer to %s's acquire of %s (%s), nor to the release that withdraws it (%s): %s may stay queued until released" % (
                client,
                lock,
                cause,
                withdraw_error,
                client,
            )
        super().__init__(msg)
        self.lock = lock
        self.client = client
        self.cause = cause
        self.withdraw_error = withdraw_error


class LeaseLost(Exception):
    """A lease was lost while it should have been held: the server refused a
    renew (:class:`NotHolder`: the lease was revoked, released from
    elsewhere, lapsed, or the client was aborted as a deadlock victim), or no
    renew succeeded before the lease may have ended (:attr:`cause` is the
    last renew's error). Work done under the lock since may overlap a
    successor's; the fenced store's tokens keep its writes out.

    It is :attr:`Lease.error` once :attr:`Lease.lost` is set, and leaving a
    ``with`` block of a lost lease raises it (unless the block raised).
    """

    lock: str
    """The lock of the lease."""
    client: str
    """The client that held it."""
    token: int
    """The lease's fencing token."""
    cause: Optional[BaseException]
    """The renew's refusal, or the last renew's error."""
    expired: bool
    """True when renewals failed until the lease may have ended; False when
    the server refused a renew."""

    def __init__(
        self, lock: str, client: str, token: int, cause: Optional[BaseException], expired: bool, message: str
    ) -> None:
        super().__init__(message)
        self.lock = lock
        self.client = client
        self.token = token
        self.cause = cause
        self.expired = expired
