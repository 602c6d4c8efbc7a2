"""The OpenAPI document against the live service: schemathesis fuzzes every operation.

A service of its own (``own_server``: the fuzzer changes the budget and adds analysts). Every
response must have a documented status, a body that matches its documented schema and no
5xx. Operations that need a key get the key their security scheme names (analyst or
admin); schemathesis's ``ignored_auth`` check also sends them without one and expects 401.
A bounded number of examples per operation keeps the run short.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi import checks as st_checks

CHECKS = [
    st_checks.status_code_conformance,
    st_checks.content_type_conformance,
    st_checks.response_schema_conformance,
    st_checks.negative_data_rejection,
    st_checks.ignored_auth,
    not_a_server_error,
]


Server = Any  # tests/service/conftest.py: Server


@pytest.fixture(scope="module")
def fuzz_server(own_server: Server) -> Server:
    """The module's own service: the fuzzer changes the budget and adds analysts."""
    return own_server


@pytest.fixture(scope="module")
def keys(fuzz_server: Server) -> dict[str, dict[str, str]]:
    return {"analyst": fuzz_server.new_analyst("fuzzer"), "admin": fuzz_server.admin()}


OPERATIONS = [
    "GET /api/schema",
    "POST /api/query",
    "POST /api/quote",
    "GET /api/history",
    "GET /api/budget",
    "POST /api/admin/analysts",
    "PUT /api/admin/budget",
]


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_service_matches_its_openapi_document(
    fuzz_server: Server, keys: dict[str, dict[str, str]], mode: str
) -> None:
    """No undocumented status, no schema violation, no 5xx, on every operation."""
    schema = schemathesis.openapi.from_url(fuzz_server.url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    assert sorted(f"{o.method.upper()} {o.path}" for o in ops) == sorted(OPERATIONS)
    gen = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    for op in ops:
        if gen == GenerationMode.NEGATIVE and not (list(op.body) or list(op.query)):
            continue  # nothing to make invalid (the key is checked by ignored_auth)
        who = "admin" if op.path.startswith("/api/admin") else "analyst"
        _fuzz(op, gen, fuzz_server.url, keys[who])


def _fuzz(op: Any, gen: Any, url: str, headers: dict[str, str]) -> None:
    @given(case=op.as_strategy(generation_mode=gen))
    @settings(
        max_examples=20,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, headers=headers, checks=CHECKS)

    run()


def test_openapi_declares_keys_statuses_and_types(fuzz_server: Server) -> None:
    doc = httpx.get(fuzz_server.url + "/openapi.json", timeout=30).json()
    schemes = doc["components"]["securitySchemes"]
    assert {s["scheme"] for s in schemes.values()} == {"bearer"}
    assert set(schemes) == {"analystKey", "adminKey"}
    ops = doc["paths"]
    assert ops["/api/query"]["post"]["security"] == [{"analystKey": []}]
    assert ops["/api/admin/budget"]["put"]["security"] == [{"adminKey": []}]
    assert {"analystKey", "adminKey"} == {
        k for s in ops["/api/budget"]["get"]["security"] for k in s
    }


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
@pytest.mark.parametrize(
    "internal",
    [
        "scales must contain at least one positive scale",
        "the characteristic function decays too slowly for exact inversion at this "
        "accuracy; use method='pc'",
    ],
)
def test_engine_limits_are_refusals_not_leaks(
    internal: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A numerical limit of the engine met while planning (the messages the fuzzer once
    saw): a documented 409 refusal (a refused quote) that names no internal argument."""
    from fastapi.testclient import TestClient

    from dpbayes.service import state
    from dpbayes.service.app import create_app

    def planner(*_a: Any, **_k: Any) -> Any:
        raise ValueError(internal)

    admin = {"Authorization": "Bearer " + "k" * 32}
    app = create_app(None, f"sqlite:///{tmp_path / 's.db'}", "k" * 32)
    with TestClient(app) as c:
        key = c.post("/api/admin/analysts", json={"name": "x"}, headers=admin).json()
        who = {"Authorization": f"Bearer {key['api_key']}"}
        monkeypatch.setattr(state, "plan_candidates", planner)
        body = {"coefficients": [1.0] + [1e-9] * 199, "half_width": 3, "confidence": 0.9}
        r = c.post("/api/query", json=body, headers=who)
        assert r.status_code == 409 and r.json()["status"] == "refused", r.text
        q = c.post("/api/quote", json=body, headers=who)
        assert q.status_code == 200 and q.json()["status"] == "refused", q.text
        for text in (r.json()["detail"], q.json()["reason"]):
            assert text.startswith("the service cannot compute this query's error")
            assert text.endswith("nothing spent")
            assert "method=" not in text and "scales" not in text
        assert c.get("/api/budget", headers=admin).json()["spent"]["epsilon"] == 0.0
