"""The answers of the HTTP API, as the dicts the client returns.

Each is the JSON object the server sends (docs/api.md, docs/openapi.json),
decoded as it is: these TypedDicts only describe them for type checkers.
Times are Unix seconds of the server's clock.
"""

from __future__ import annotations

from typing import List, Optional, TypedDict


class Predecessor(TypedDict):
    """A lease whose end made a grant possible (docs/api.md, "Answers that
    say why")."""

    client: Optional[str]
    token: int
    mode: str
    ended: str
    ended_at: int


class CycleMember(TypedDict):
    """A client on a wait cycle that a deadlock abort broke."""

    client: Optional[str]
    age: int
    waits_for: str


class Abort(TypedDict):
    """Why a deadlock victim was chosen: the youngest of its cycle."""

    victim: str
    age: int
    cycle: List[CycleMember]


class _Granted(TypedDict):
    outcome: str
    token: int
    granted_at: int
    expires_at: int


class AcquireGranted(_Granted, total=False):
    """Acquire's answer when the client holds the lock: ``outcome`` is
    ``"granted"``. ``victims`` and ``aborts`` are there when the request
    aborted other clients, ``predecessors`` when earlier leases ended for
    this grant."""

    victims: List[str]
    aborts: List[Abort]
    predecessors: List[Predecessor]


class RenewResult(TypedDict):
    """Renew's answer: ``outcome`` is ``"renewed"``; the lease keeps its
    token and ``granted_at``, and now ends at ``expires_at``."""

    outcome: str
    token: int
    granted_at: int
    expires_at: int


class OutcomeResult(TypedDict):
    """The answer of release (``"released"``, or ``"withdrawn"`` for a
    waiter), revoke (``"revoked"``) and write (``"ok"``)."""

    outcome: str


class ReadResult(TypedDict, total=False):
    """Read's answer: the value last accepted and the token of the write
    that stored it; ``{"value": None}`` (no ``token``) when there is none."""

    value: Optional[str]
    token: int


class _Waiter(TypedDict):
    client: str
    mode: str
    position: int


class Waiter(_Waiter, total=False):
    """A client in a lock's queue; ``estimated_wait_s`` when the lock has
    history to estimate from."""

    estimated_wait_s: float


class Holder(TypedDict):
    """A lease on a lock, as inspect and locks list it."""

    client: str
    mode: str
    token: int
    expires_at: int


class InspectResult(TypedDict):
    """Inspect's answer: the lock's holders, by token, and its queue,
    oldest first."""

    lock: str
    holders: List[Holder]
    queue: List[Waiter]
    holder_count: int
    queue_length: int


class Hold(TypedDict):
    """A lease a client holds, as status lists it."""

    lock: str
    mode: str
    token: int
    expires_at: int


class _WaitingFor(TypedDict):
    lock: str
    position: int


class WaitingFor(_WaitingFor, total=False):
    """The lock a client waits for, and its rank in the queue."""

    estimated_wait_s: float


class _Status(TypedDict):
    client: str
    age: Optional[int]
    holds: List[Hold]
    waiting: Optional[WaitingFor]
    next: Optional[str]


class StatusResult(_Status, total=False):
    """Status's answer: the client's age (None for a client the server does
    not know), every lease it holds, and the lock it waits for. ``aborted``
    explains a deadlock victim's abort."""

    aborted: Abort


class _LockSummary(TypedDict):
    lock: str
    holders: List[Holder]
    holder_count: int
    waiting: int


class LockSummary(_LockSummary, total=False):
    """A lock with holders or waiters, as the locks listing gives it: its
    first 10 holders and ``holder_count``, all of them (``inspect`` reads
    them all); ``oldest_wait_s`` when somebody waits."""

    oldest_wait_s: int


class GrantRecord(TypedDict):
    """A grant of the history: who held the token, and how the lease ended
    (``ended`` and ``ended_at`` are None while it is live)."""

    lock: str
    token: int
    client: Optional[str]
    mode: str
    granted_at: int
    expires_at: int
    ended_at: Optional[int]
    ended: Optional[str]


class _Event(TypedDict):
    id: int
    kind: str
    at: int
    lock: Optional[str]
    client: Optional[str]
    token: Optional[int]
    mode: Optional[str]


class Event(_Event, total=False):
    """An event of ``GET /v1/events`` (docs/api.md, "events"). The first
    seven fields are always there, None where the kind has none; the others
    come with the kinds that have them."""

    expires_at: int
    from_queue: bool
    position: int
    predecessors: List[Predecessor]
    abort: Abort
    requester: Optional[str]
    lost: List[Hold]
    highest: int
    truncated: bool


class HealthResult(TypedDict):
    """Health's answer: ``"ok"``, the last time the server used (None
    before its first transaction), and its version."""

    status: str
    clock: Optional[int]
    version: str
