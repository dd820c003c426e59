"""A client for leasekeeper's HTTP API (docs/api.md, docs/python.md), on
Python 3.9 or newer and its standard library alone.

::

    from leasekeeper import Client

    lk = Client()  # LEASEKEEPER_SERVER, LEASEKEEPER_AUTH_TOKEN, LEASEKEEPER_CA_FILE
    with lk.lock("exports/daily", client="etl-a", ttl=30, wait=600) as lease:
        lease.write("part-1", "rows 1-100")   # with the lease's fencing token
        if lease.lost.is_set():               # set when the lease is lost
            ...

A :class:`Lease` renews itself in a daemon thread until the block ends, and
is released on exit, also on an exception. The plain calls
(:meth:`Client.acquire`, :meth:`Client.renew`, ...) send one request each
and return the API's answer, a dict. Error answers raise :class:`Error`,
whose subclasses name the codes programs branch on.
"""

import logging as _logging

from ._client import Client
from ._errors import (
    ClientBusy,
    Deadlock,
    Error,
    LeaseLost,
    NotAcquired,
    NotHolder,
    RateLimited,
    StaleToken,
    TokenNotGranted,
    Unavailable,
    UnknownOutcome,
    Withdrawn,
)
from ._lease import Lease, Lock
from ._version import VERSION
from ._types import (
    Abort,
    AcquireGranted,
    CycleMember,
    Event,
    GrantRecord,
    HealthResult,
    Hold,
    Holder,
    InspectResult,
    LockSummary,
    OutcomeResult,
    Predecessor,
    ReadResult,
    RenewResult,
    StatusResult,
    Waiter,
    WaitingFor,
)
from ._watch import EventStream

__version__ = VERSION
"""The client's version: that of the leasekeeper release it comes with."""

__all__ = [
    "Abort",
    "AcquireGranted",
    "Client",
    "ClientBusy",
    "CycleMember",
    "Deadlock",
    "Error",
    "Event",
    "EventStream",
    "GrantRecord",
    "HealthResult",
    "Hold",
    "Holder",
    "InspectResult",
    "Lease",
    "LeaseLost",
    "Lock",
    "LockSummary",
    "NotAcquired",
    "NotHolder",
    "OutcomeResult",
    "Predecessor",
    "RateLimited",
    "ReadResult",
    "RenewResult",
    "StaleToken",
    "StatusResult",
    "TokenNotGranted",
    "Unavailable",
    "UnknownOutcome",
    "Waiter",
    "WaitingFor",
    "Withdrawn",
]

# Shown as leasekeeper.NotHolder, not leasekeeper._errors.NotHolder, in
# tracebacks and reprs; the names are the package's, where they are found.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name

# A library's logger stays quiet unless the application configures logging:
# the lease's lost event and the exceptions are the API.
_logging.getLogger(__name__).addHandler(_logging.NullHandler())
