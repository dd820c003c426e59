"""The event stream, GET /v1/events, read as Server-Sent Events."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
from types import TracebackType
from typing import Dict, Generator, List, Mapping, Optional, Type

from ._errors import Error
from ._http import Transport, decode_answer
from ._types import Event

log = logging.getLogger("leasekeeper")

# How long the stream waits for anything from the server before it takes
# the connection for dead: the server sends a comment every 15 seconds on a
# quiet stream.
WATCH_IDLE = 45.0

# The longest line read: an event's data is one line of JSON.
MAX_LINE = 16 << 20

# Answers that a retry would meet again: a bad filter, no or a bad token, a
# filter the principal may not use, a URL that is not the API's.
PERMANENT = (400, 401, 403, 404, 405)


class EventStream:
    """The events of ``GET /v1/events``, from :meth:`Client.watch`: an
    iterator of :class:`Event` dicts, in commit order, that reconnects by
    itself, resuming after the last event id it saw (``Last-Event-ID``).

    Two kinds are about the stream, not the locks: ``reset`` (events may
    have been missed: the server restarted, or this reader came back after
    more events than the server's buffer holds; read the state again) and
    ``overflow`` (this reader fell behind, and the server ended the stream;
    it reconnects). Each reconnection is logged (logger ``leasekeeper``,
    level WARNING).

    Iterate it in one thread; :meth:`close`, from any thread, ends it.
    It is a context manager that closes it on exit.
    """

    def __init__(self, transport: Transport, filters: Mapping[str, Optional[str]], last_event_id: Optional[int]) -> None:
        self._t = transport
        self._query: Dict[str, str] = {k: v for k, v in filters.items() if v is not None}
        self._last: Optional[str] = None if last_event_id is None else str(int(last_event_id))
        self._mu = threading.Lock()
        self._closed = False
        self._sock: Optional[socket.socket] = None
        self._wake = threading.Event()
        self._gen = self._events()

    def __repr__(self) -> str:
        return "EventStream(%r, %r, last_event_id=%s)" % (self._t.url, self._query, self._last)

    @property
    def last_event_id(self) -> Optional[int]:
        """The id of the last event received, from which a reconnection
        resumes; None before the first."""
        return None if self._last is None else int(self._last)

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        return next(self._gen)

    def close(self) -> None:
        """Ends the stream: the iteration stops (a ``for`` loop over it
        ends), and its connection is closed. Safe from any thread."""
        with self._mu:
            self._closed = True
            sock = self._sock
        self._wake.set()
        if sock is not None:
            try:
                # The plain socket's shutdown, also under TLS: the reading
                # thread's recv then returns, and sees the stream closed.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self._gen.close()
        except ValueError:
            pass  # running in another thread, which stops on its own

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def _events(self) -> Generator[Event, None, None]:
        backoff = 0.1
        while not self._closed:
            got = False
            wait = backoff
            err: object
            try:
                with contextlib.closing(self._stream()) as events:
                    for e in events:
                        got, backoff = True, 0.1
                        yield e
                err = "the server ended the stream"
            except Error as e:
                if e.status in PERMANENT:
                    raise
                err = e
                if e.retry_after is not None and e.retry_after > wait:
                    wait = e.retry_after
            except (OSError, http.client.HTTPException, ValueError) as e:
                err = e
            if self._closed:
                return
            if not got:
                backoff = min(2 * backoff, 5.0)
            log.warning("event stream of %s: %s; reconnecting in %.1f s", self._t.url, err, wait)
            self._wake.wait(wait)

    def _stream(self) -> Generator[Event, None, None]:
        """One connection's events; the last id seen is kept for the next."""
        conn = self._t.new_connection(self._t.timeout)
        try:
            conn.connect()
            with self._mu:
                if self._closed:
                    return
                self._sock = conn.sock
            headers = self._t.headers("text/event-stream")
            if self._last is not None:
                headers["Last-Event-ID"] = self._last
            target = self._t.target("/v1/events", self._query)
            conn.request("GET", target, headers=headers)
            resp = conn.getresponse()
            if resp.status != 200:
                data = resp.read(1 << 16)
                if self._t.hook is not None:
                    self._t.hook("GET", target, resp.status, dict(resp.getheaders()), data)
                decode_answer("GET", "/v1/events", resp.status, data, resp.getheader("Retry-After"))
            # A connection that went silent (a host gone, a partition) looks
            # like a quiet one: the server's keep-alive comments tell them
            # apart.
            if self._sock is not None:
                self._sock.settimeout(WATCH_IDLE)
            event_id, kind, data_lines, has_id = "", "", [], False  # type: str, str, List[str], bool
            while True:
                raw = resp.readline(MAX_LINE)
                if not raw:
                    return
                if not raw.endswith(b"\n"):
                    if len(raw) >= MAX_LINE:
                        raise ValueError("an event longer than %d bytes" % MAX_LINE)
                    return  # cut in the middle of a line
                line = raw.decode("utf-8").rstrip("\n").rstrip("\r")
                if line == "":  # the end of an event
                    if has_id:
                        self._last = event_id
                    if data_lines:
                        event = json.loads("\n".join(data_lines))
                        if not isinstance(event, dict):
                            raise ValueError("an event that is not a JSON object: %.200r" % data_lines)
                        if "kind" not in event:
                            event["kind"] = kind
                        yield event  # type: ignore[misc]
                    event_id, kind, data_lines, has_id = "", "", [], False
                    continue
                field, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if field == "id":
                    if value.isdigit():
                        event_id, has_id = value, True
                elif field == "event":
                    kind = value
                elif field == "data":
                    data_lines.append(value)
                # "" is a comment (the keep-alive); other fields are not the API's.
        finally:
            with self._mu:
                self._sock = None
            conn.close()
