"""Fixtures: the leasekeeper binary, built once per session; a fresh server
per test; a Client whose every answer is checked against docs/openapi.json."""

import pathlib
from typing import Any, Callable, Iterator, List, Mapping, Optional

import pytest

import support
from support import OpenAPI, Server

import leasekeeper


# make_server(args=None, tls=False): a started Server.
ServerFactory = Callable[..., Server]


@pytest.fixture(scope="session")
def leasekeeper_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The leasekeeper binary, built from this repository (the first build
    of modernc SQLite takes a minute or so)."""
    return support.build_server(tmp_path_factory.mktemp("bin") / "leasekeeper")


@pytest.fixture(scope="session")
def openapi() -> Optional[OpenAPI]:
    """The checker of answers, or None where python3-jsonschema is missing
    (never in CI, which installs it)."""
    try:
        return OpenAPI()
    except ImportError:
        if support.in_ci():
            raise
        return None


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests choose the server, token and CA file themselves."""
    for name in ("LEASEKEEPER_SERVER", "LEASEKEEPER_AUTH_TOKEN", "LEASEKEEPER_CA_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_server(leasekeeper_bin: str, tmp_path: pathlib.Path) -> Iterator[ServerFactory]:
    """Starts servers for a test (with extra serve flags), stopped at its
    end."""
    servers: List[Server] = []

    def make(args: Optional[List[str]] = None, tls: bool = False, name: str = "serve") -> Server:
        d = tmp_path / ("%s-%d" % (name, len(servers)))
        d.mkdir()
        s = Server(leasekeeper_bin, d, args, tls)
        servers.append(s)
        s.start()
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def server(make_server: ServerFactory) -> Server:
    """A fresh server, without an auth file."""
    return make_server()


@pytest.fixture
def answers(openapi: Optional[OpenAPI]) -> Iterator["AnswerCheck"]:
    """Checks every answer a Client hooked to it gets; the test fails on
    an answer the document does not allow."""
    check = AnswerCheck(openapi)
    yield check
    assert not check.problems, "answers that docs/openapi.json does not allow:\n" + "\n".join(check.problems)


class AnswerCheck:
    """Collects the problems of the answers of the Clients it hooks."""

    def __init__(self, openapi: Optional[OpenAPI]) -> None:
        self.openapi = openapi
        self.problems: List[str] = []

    def hook(self, client: leasekeeper.Client) -> leasekeeper.Client:
        """Checks client's answers from now on; returns it."""
        self.hook_transport(client._transport)
        return client

    def hook_transport(self, transport: Any) -> None:
        """Checks the answers of a Client's transport from now on."""
        if self.openapi is None:
            return
        oa = self.openapi

        def check(method: str, target: str, status: int, headers: Mapping[str, str], body: bytes) -> None:
            self.problems.extend(oa.check(method, target, status, headers, body))

        transport.hook = check


@pytest.fixture
def lk(server: Server, answers: AnswerCheck) -> Iterator[leasekeeper.Client]:
    """A Client of the test's server."""
    c = answers.hook(leasekeeper.Client(server.url, timeout=10))
    yield c
    c.close()
