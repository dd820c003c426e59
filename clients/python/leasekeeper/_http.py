"""HTTP for the client: the server's URL, TLS, and one keep-alive
connection per thread.

``http.client`` connections are not safe to share between threads, and a
lease's renew thread must not wait behind its owner's blocked acquire, so
each thread that sends requests gets a connection of its own. An event
stream holds its answer open, so it gets a connection of its own too.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from ._errors import Error, error_for
from ._version import VERSION

SERVER_ENV = "LEASEKEEPER_SERVER"
AUTH_TOKEN_ENV = "LEASEKEEPER_AUTH_TOKEN"
CA_FILE_ENV = "LEASEKEEPER_CA_FILE"
DEFAULT_SERVER = "http://127.0.0.1:7070"

# What the client reads of an answer at most: a locks listing of a busy
# server is the largest legitimate one.
MAX_ANSWER = 64 << 20

USER_AGENT = "leasekeeper-python/" + VERSION

Connection = Union[http.client.HTTPConnection, http.client.HTTPSConnection]

# Called with each answer (method, target, status, headers, body): the tests
# check every answer against docs/openapi.json through it.
AnswerHook = Callable[[str, str, int, Mapping[str, str], bytes], None]


class Unsent(Exception):
    """The request never left this machine: no connection was made, or the
    server's certificate was not trusted. Only for the acquire, which must
    tell that from an unknown outcome; :attr:`cause` is the real error."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(str(cause))
        self.cause = cause


def resolve(
    server: Optional[str], auth_token: Optional[str], ca_file: Optional[str]
) -> Tuple[str, Optional[str], Optional[ssl.SSLContext]]:
    """The server's root URL, the bearer token and the TLS context of a
    Client's arguments, falling back on the environment as the CLI does
    (docs/cli.md): a bare ``host:port`` gets ``http://``, or ``https://``
    when a CA file is given; ``LEASEKEEPER_CA_FILE`` is ignored for an
    ``http://`` server, an explicit ``ca_file`` is refused for one."""
    ca_from_env = ca_file is None
    if ca_from_env:
        ca_file = os.environ.get(CA_FILE_ENV) or None
    url = server or os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    if "://" not in url:
        url = ("https://" if ca_file else "http://") + url
    url = root_url(url)
    https = url.startswith("https://")
    if not https and not url.startswith("http://"):
        raise ValueError("the server's URL must be http:// or https://, not %r" % url)
    if ca_file and not https:
        if ca_from_env:
            # The environment may be set for the fleet's https servers while
            # this one is plain: nothing to verify.
            ca_file = None
        else:
            raise ValueError("ca_file is for an https:// server, not %s" % url)
    if auth_token is None:
        auth_token = os.environ.get(AUTH_TOKEN_ENV) or None
    context = None
    if https:
        # With a CA file, only its authorities are trusted; without one,
        # the system's.
        context = ssl.create_default_context(cafile=ca_file)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
    return url, auth_token or None, context


def root_url(url: str) -> str:
    """The server's root URL: without a trailing slash, nor a last path
    element ``v1``, which the API's paths bring themselves (a common slip,
    as the Go client's ``client.New`` forgives it too)."""
    url = url.rstrip("/")
    if url.endswith("/v1") and "://" in url[: -len("/v1")]:
        url = url[: -len("/v1")].rstrip("/")
    return url


def retry_after(value: Optional[str]) -> Optional[float]:
    """A Retry-After header's delay in seconds: delay-seconds, or an HTTP
    date (RFC 9110, section 10.2.3); None when there is none."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(min(int(value), 86400))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - time.time(), 0.0)


def dropped(sock: Optional[socket.socket]) -> bool:
    """Whether an idle keep-alive connection was closed by the server (it
    closes idle ones after a while): anything to read on it now, an end of
    file or stray bytes, means it cannot carry a request."""
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            p = select.poll()
            p.register(sock, select.POLLIN)
            return bool(p.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


class Transport:
    """Sends the API's requests to one server, on one connection per
    thread."""

    def __init__(self, url: str, auth_token: Optional[str], context: Optional[ssl.SSLContext], timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ValueError("the server's URL has no host: %r" % url)
        if parts.query or parts.fragment:
            raise ValueError("the server's URL must not have a query or a fragment: %r" % url)
        self.url = url
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.timeout = timeout
        self.context = context
        self._auth = auth_token
        self._local = threading.local()
        self._mu = threading.Lock()
        self._conns: List[Connection] = []
        self.hook: Optional[AnswerHook] = None

    def new_connection(self, timeout: float) -> Connection:
        """A new, unconnected connection to the server."""
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def headers(self, accept: str = "application/json") -> Dict[str, str]:
        """The headers every request carries."""
        h = {"Accept": accept, "User-Agent": USER_AGENT}
        if self._auth:
            h["Authorization"] = "Bearer " + self._auth
        return h

    def target(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        """The request target of an API path, with its query."""
        t = self.prefix + path
        if query:
            q = [(k, str(v)) for k, v in query.items() if v is not None]
            if q:
                t += "?" + urllib.parse.urlencode(q)
        return t

    def _connection(self, timeout: float) -> Tuple[Connection, bool]:
        """This thread's connection and whether it carried requests before."""
        conn: Optional[Connection] = getattr(self._local, "conn", None)
        if conn is not None and dropped(conn.sock):
            self._discard(conn)
            conn = None
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        conn = self.new_connection(timeout)
        self._local.conn = conn
        with self._mu:
            self._conns.append(conn)
        return conn, False

    def _discard(self, conn: Connection) -> None:
        conn.close()
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with self._mu:
            if conn in self._conns:
                self._conns.remove(conn)

    def close_local(self) -> None:
        """Closes the calling thread's connection, if it has one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            self._discard(conn)

    def close(self) -> None:
        """Closes every thread's idle connection."""
        with self._mu:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()
        self._local = threading.local()

    def request(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        mark_unsent: bool = False,
    ) -> Dict[str, Any]:
        """Sends one request of the API and returns its 200 answer's JSON
        object. An error answer raises :class:`Error`; no answer raises the
        OSError (or ``http.client.HTTPException``) of the failure, or, with
        mark_unsent, :class:`Unsent` when the request never left."""
        t = self.timeout if timeout is None else timeout
        target = self.target(path, query)
        headers = self.headers()
        payload = None
        if body is not None:
            payload = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn, reused = self._connection(t)
            if not reused:
                try:
                    conn.connect()
                except OSError as e:
                    self._discard(conn)
                    if mark_unsent:
                        raise Unsent(e) from e
                    raise
                except BaseException:
                    self._discard(conn)
                    raise
            try:
                conn.request(method, target, body=payload, headers=headers)
            except OSError:
                self._discard(conn)
                # The server closed the kept-alive connection as the
                # request went out: it read nothing of it.
                if reused and attempt == 1:
                    continue
                raise
            except BaseException:
                self._discard(conn)
                raise
            try:
                resp = conn.getresponse()
                data = read_answer(resp)
            except (OSError, http.client.HTTPException):
                self._discard(conn)
                # A kept-alive connection closed before any answer: a read
                # can be sent again; a write may have happened.
                if reused and attempt == 1 and method == "GET":
                    continue
                raise
            except BaseException:
                self._discard(conn)
                raise
            if resp.will_close:
                self._discard(conn)
            return self._answer(method, target, resp, data)
        raise AssertionError("unreachable")

    def _answer(self, method: str, target: str, resp: http.client.HTTPResponse, data: bytes) -> Dict[str, Any]:
        if self.hook is not None:
            self.hook(method, target, resp.status, dict(resp.getheaders()), data)
        path = target.split("?", 1)[0]
        if len(data) > MAX_ANSWER:
            raise Error("", "%s %s: an answer longer than %d bytes" % (method, path, MAX_ANSWER), resp.status)
        return decode_answer(method, path, resp.status, data, resp.getheader("Retry-After"))


def read_answer(resp: http.client.HTTPResponse) -> bytes:
    """The answer's body, up to one byte past MAX_ANSWER. Read in pieces:
    before Python 3.11, read(n) allocates n bytes at once, whatever comes."""
    parts = []
    size = 0
    while size <= MAX_ANSWER:
        chunk = resp.read(1 << 16)
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts)


def decode_answer(method: str, path: str, status: int, data: bytes, retry_after_header: Optional[str]) -> Dict[str, Any]:
    """The JSON object of a 200 answer; raises the :class:`Error` of any
    other, the subclass of its code when it has one."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except ValueError:
        obj = None
    if status == 200:
        if isinstance(obj, dict):
            return obj
        raise Error("", "%s %s: unexpected answer %r" % (method, path, data[:200]), status)
    if isinstance(obj, dict) and isinstance(obj.get("error"), str) and obj["error"]:
        message = obj.get("message")
        applied = obj.get("applied")
        raise error_for(
            obj["error"],
            message if isinstance(message, str) else "",
            status,
            retry_after(retry_after_header),
            False if applied is False else None,
        )
    raise Error("", "%s %s: unexpected answer %r" % (method, path, data[:200]), status, retry_after(retry_after_header))


def transient(e: BaseException) -> bool:
    """Whether a request's failure may pass on a retry: no answer (the
    network, a timeout), the server's own failures and shutdown, a proxy's
    timeout, a rate limit."""
    if isinstance(e, Error):
        return e.status >= 500 or e.status in (408, 429)
    return isinstance(e, (OSError, http.client.HTTPException))
