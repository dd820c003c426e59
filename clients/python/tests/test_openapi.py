"""The answers' shapes, against docs/openapi.json: every test's Client
(the lk fixture, and those hooked to answers) has each answer checked; this
file makes sure the check covers every call and can fail."""

from typing import Optional

import pytest

import support
from conftest import AnswerCheck
from support import OpenAPI

import leasekeeper
from leasekeeper import Client


@pytest.fixture
def oa(openapi: Optional[OpenAPI]) -> OpenAPI:
    if openapi is None:
        pytest.skip("python3-jsonschema is not installed (apt-get install python3-jsonschema)")
    return openapi


def test_the_check_can_fail(oa: OpenAPI) -> None:
    ok = b'{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}'
    assert oa.check("POST", "/v1/acquire", 200, {}, ok) == []
    # A field the document does not have, one missing, one mistyped.
    assert oa.check("POST", "/v1/acquire", 200, {}, ok[:-1] + b',"extra":1}') != []
    assert oa.check("POST", "/v1/acquire", 200, {}, b'{"outcome":"granted","token":7}') != []
    assert oa.check("POST", "/v1/renew", 200, {}, b'{"outcome":"renewed","token":"7","granted_at":1,"expires_at":2}') != []
    # A status the operation does not list; an error code of another status.
    assert oa.check("GET", "/v1/health", 409, {}, b'{"error":"not_holder","message":"m"}') != []
    assert oa.check("POST", "/v1/renew", 409, {}, b'{"error":"invalid_ttl","message":"m"}') != []
    # A 429 without its Retry-After.
    limited = b'{"error":"rate_limited","message":"m"}'
    assert oa.check("GET", "/v1/status", 429, {"Retry-After": "1"}, limited) == []
    assert oa.check("GET", "/v1/status", 429, {}, limited) != []
    # An event.
    grant = {"id": 1, "kind": "grant", "at": 1, "lock": "L", "client": "c", "token": 1, "mode": "exclusive", "expires_at": 31}
    assert oa.validate(oa.schema("Event"), grant) == []
    assert oa.validate(oa.schema("Event"), dict(grant, kind="granted")) != []


def test_every_call_is_checked(server: support.Server, oa: OpenAPI, answers: AnswerCheck) -> None:
    oa.checked.clear()
    lk = answers.hook(Client(server.url))
    with lk.lock("exports/daily", client="etl-a", ttl=30) as lease:
        lease.write("part-1", "rows 1-100")
        lease.read("part-1")
        with pytest.raises(leasekeeper.NotAcquired):
            lk.acquire("exports/daily", client="etl-b", ttl=30, wait=1)
        lk.renew("exports/daily", client="etl-a", ttl=30)
        with pytest.raises(leasekeeper.ClientBusy):
            lk.acquire("exports/daily", client="etl-a", ttl=30)
        lk.inspect("exports/daily")
        lk.status("etl-a")
        list(lk.locks())
    lk.acquire("exports/daily", client="etl-b", ttl=30)
    lk.revoke("exports/daily", client="etl-b")
    with pytest.raises(leasekeeper.NotHolder):
        lk.renew("exports/daily", client="etl-b", ttl=30)
    with pytest.raises(leasekeeper.Error):
        lk.acquire("exports/daily", client="etl-b", ttl=0)
    lk.read("exports/daily", "part-2")
    list(lk.history(lock="exports/daily"))
    list(lk.history(client="etl-a"))
    lk.health()
    want = {
        "POST /v1/acquire 200", "POST /v1/acquire 409", "POST /v1/acquire 400", "POST /v1/renew 200",
        "POST /v1/renew 409", "POST /v1/release 200", "POST /v1/revoke 200", "POST /v1/write 200",
        "GET /v1/read 200", "GET /v1/inspect 200", "GET /v1/status 200", "GET /v1/locks 200",
        "GET /v1/history 200", "GET /v1/health 200",
    }
    assert want <= set(oa.checked), "not checked: %s" % sorted(want - set(oa.checked))
