"""The analysts' web page in a real headless browser (Debian's Chromium, driven by Playwright).

The page is served by a service of this module's own (conftest.py's ``own_server``, so no
other test's spending changes what the page must show); the tests type a key, compose a
query from the schema, read its price, ask it, and check what the page shows against the
API's own /quote, /history and /budget, at desktop and at phone width (390 px). Chromium
comes from ``.ci/setup.d/chromium.sh`` (Playwright's own browser download is never used);
a missing browser skips the tests naming that script, and fails them under ``CI=true``.
Set ``DPBAYES_WEB_SCREENSHOT=path.png`` (``DPBAYES_WEB_PHONE_SCREENSHOT``: at 390 px) to save
a screenshot of the answered query.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

Server = Any  # tests/service/conftest.py: Server

CHROMIUM = os.environ.get("DPBAYES_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WHERE = "health = fair and idp = 0 and year = 3 and mdvis in [1, 6)"


@pytest.fixture(scope="module")
def browser(require: Any) -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        require(f"no Chromium at {CHROMIUM}", "chromium.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require("playwright is not installed (pip install '.[test]')", "chromium.sh")

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def api_state(srv: Server) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The API's /budget and full /history (admin view)."""
    b = httpx.get(srv.url + "/api/budget", headers=srv.admin(), timeout=30).json()
    h: list[dict[str, Any]] = []
    while True:
        batch = httpx.get(
            srv.url + "/api/history",
            params={"offset": len(h), "limit": 1000},
            headers=srv.admin(),
            timeout=30,
        ).json()["answers"]
        h += batch
        if len(batch) < 1000:
            return b, h


def fmt(x: float) -> str:
    """The page's number format: two decimals with thousands separators (en-US)."""
    return f"{x:,.2f}"


def fmt_eps(x: float) -> str:
    """The page's eps format (app.js fmtEps)."""
    if x == 0:
        return "0"
    if abs(x) >= 0.01:
        return f"{x:.4f}"
    m, e = f"{x:.3e}".split("e")
    return f"{m}e{int(e):+d}"


def ask(page: Any) -> tuple[int, dict[str, Any]]:
    """Click Ask; the API's status and JSON body, once the page has refreshed the budget."""
    with page.expect_response(lambda r: r.url.endswith("/api/query")) as info:
        page.click("#ask")
    resp = info.value
    # the button is enabled again once the page has shown the reply, budget and history
    page.wait_for_selector("#ask:not([disabled])")
    return resp.status, resp.json()


def quote(srv: Server, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(srv.url + "/api/quote", json=body, headers=srv.admin(), timeout=60)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_web_page_composes_asks_and_shows_answer(browser: Any, own_server: Server) -> None:
    srv = own_server
    # room for the fresh answer below (this module's service: nothing else spends on it)
    bud = httpx.get(srv.url + "/api/budget", headers=srv.admin(), timeout=30).json()
    r = httpx.put(
        srv.url + "/api/admin/budget",
        json={"epsilon": bud["spent"]["epsilon"] + 10.0},
        headers=srv.admin(),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    name = "web-" + os.urandom(3).hex()
    key = srv.new_analyst(name)["Authorization"].removeprefix("Bearer ")
    page = browser.new_page(viewport={"width": 1180, "height": 900})
    requests: list[str] = []
    page_errors: list[str] = []
    console: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    try:
        page.goto(srv.url + "/")
        assert page.title().startswith("dpbayes")

        # a wrong key: the API's message, no schema
        page.fill("#api-key", "dpb_wrong_key")
        page.click("#connect")
        page.wait_for_selector("#error:not([hidden])")
        assert page.inner_text("#error") == (
            "missing or invalid API key (Authorization: Bearer KEY)"
        )
        assert page.is_disabled("#ask")

        # the analyst's key: schema, budget and history load
        page.fill("#api-key", key)
        page.click("#connect")
        page.wait_for_selector("fieldset.attr[data-name=mdvis]")
        page.wait_for_selector("#history-body tr")
        assert page.is_hidden("#error")
        names = page.eval_on_selector_all("fieldset.attr", "els => els.map(e => e.dataset.name)")
        assert names == ["health", "idp", "year", "mdvis"]

        # compose from the attributes: the predicate is built from the choices
        page.check("fieldset[data-name=health] input[value=fair]")
        page.check("fieldset[data-name=idp] input[value='0']")
        page.check("fieldset[data-name=year] input[value='3']")
        page.select_option("fieldset[data-name=mdvis] select.from", "1")  # >= 1
        page.select_option("fieldset[data-name=mdvis] select.to", "3")  # < 6
        assert page.input_value("#where") == WHERE
        page.fill("#half-width", "10")
        page.fill("#confidence", "0.9")
        b0, h0 = api_state(srv)

        # the price before Ask: the API's quote, shown on the page; quoting spends nothing
        price = quote(srv, {"where": WHERE, "half_width": 10, "confidence": 0.9})
        assert price["status"] == "fresh" and price["epsilon"] > 0, price
        page.wait_for_selector("#price[data-status=fresh]")
        assert page.inner_text("#price") == (
            f"Price now: ε = {fmt_eps(price['epsilon'])} (one fresh answer)"
        )
        assert float(page.get_attribute("#price", "data-epsilon") or "nan") == price["epsilon"]
        assert api_state(srv) == (b0, h0)
        status, a = ask(page)
        assert status == 200 and a["epsilon_spent"] == price["epsilon"], a
        # now the history meets it: the page's price says so, and the API's quote agrees
        page.wait_for_selector("#price[data-status=free]")
        assert page.inner_text("#price").startswith("Price now: free (from the history")
        assert quote(srv, {"where": WHERE, "half_width": 10, "confidence": 0.9})["epsilon"] == 0

        # 1. a fresh answer: values on the page = the API's reply = its history and budget
        assert status == 200, a
        assert a["status"] == "fresh" and not a["free_from_history"]
        # S ln(1/(1-p)) / d with S = 5 (one person, <= 5 rows: the bundled data's unit); 1.15
        # is more than the other tests spend on single cells, so the total spend rises
        assert a["epsilon_spent"] == pytest.approx(5 * math.log(10) / 10, rel=2e-3)
        assert "add/remove one user (<= 5 rows)" in page.inner_text("#guarantee")
        b1, h1 = api_state(srv)
        assert len(h1) == len(h0) + 1
        row = h1[-1]
        assert row["analyst"] == name and row["epsilon"] == a["epsilon_spent"]
        assert b1["spent"]["epsilon"] > b0["spent"]["epsilon"]
        assert a["remaining_epsilon"] == pytest.approx(b1["remaining"]["epsilon"], rel=1e-12)
        lo, hi = a["interval"]
        assert page.inner_text("#estimate") == fmt(a["estimate"])
        assert page.inner_text("#interval") == f"[{fmt(lo)}, {fmt(hi)}] (± {fmt(10)})"
        assert hi - lo == pytest.approx(20, rel=1e-6)
        assert a["confidence_reached"] >= 0.9 - 1e-6
        assert page.inner_text("#confidence-reached").startswith(
            f"{fmt(100 * a['confidence_reached'])} %"
        )
        assert page.inner_text("#eps-spent") == fmt_eps(row["epsilon"])
        assert "fresh" in page.inner_text("#source") and "spent" in page.inner_text("#source")
        assert page.inner_text("#remaining") == fmt_eps(b1["remaining"]["epsilon"])
        assert page.inner_text("#spent") == fmt_eps(b1["spent"]["epsilon"])
        assert page.inner_text("#n-answers") == str(b1["answers"]) == str(len(h1))
        assert page.inner_text("#composition") == "Accounting: " + b1["composition"]
        assert b1["accounting"] == "basic" and "basic composition" in b1["composition"]
        first = page.locator("#history-body tr").first
        assert first.get_attribute("data-id") == str(row["id"])
        cells = first.locator("td").all_inner_texts()
        assert cells[1] == row["query"] and cells[4] == name
        assert cells[2] == fmt(row["noisy_answer"]) and cells[3] == fmt_eps(row["epsilon"])

        # the plot: the posterior density the API returned, with the interval shaded
        n_pts = len(a["density"]["x"])
        assert n_pts > 100
        assert page.get_attribute("#density", "data-points") == str(n_pts)
        curve = page.get_attribute("#density polyline.curve", "points") or ""
        assert len(curve.split()) == n_pts
        box = page.locator("#density polygon.interval").bounding_box()
        svg_box = page.locator("#density").bounding_box()
        assert box is not None and svg_box is not None
        # the shaded band spans the interval's share of the plotted x range
        x = a["density"]["x"]
        share = (hi - lo) / (x[-1] - x[0])
        assert box["width"] / svg_box["width"] == pytest.approx(share, abs=0.05)
        assert box["height"] > 20
        shot = os.environ.get("DPBAYES_WEB_SCREENSHOT")
        if shot:
            page.screenshot(path=shot, full_page=True)

        # 2. a looser requirement on the same query: answered from the history, for free
        page.fill("#half-width", "20")
        status, f = ask(page)
        assert status == 200 and f["free_from_history"] and f["epsilon_spent"] == 0.0, f
        assert "free" in page.inner_text("#source")
        assert page.inner_text("#eps-spent") == "0"
        b2, h2 = api_state(srv)
        assert b2["spent"] == b1["spent"] and h2 == h1
        assert page.inner_text("#remaining") == fmt_eps(b1["remaining"]["epsilon"])
        assert page.locator("#history-body tr").count() == min(50, len(h2))

        # 3. bad input: the API's one-line message on the page, nothing spent
        page.fill("#where", "health = purple")
        status, e = ask(page)
        assert status == 400 and "not in the domain" in e["detail"]
        assert page.inner_text("#error") == e["detail"]
        page.fill("#where", WHERE)
        page.fill("#half-width", "-1")
        status, e = ask(page)
        assert status == 422 and e["detail"].startswith("half_width:")
        assert page.inner_text("#error") == e["detail"]
        # a requirement the budget cannot pay for: refused, nothing spent
        page.fill("#half-width", "0.0001")
        page.fill("#confidence", "0.99")
        status, e = ask(page)
        assert status == 409 and e["status"] == "refused" and e["epsilon_spent"] == 0.0, e
        assert "nothing spent" in e["detail"]  # said once, not twice
        assert page.inner_text("#error") == e["detail"]
        assert page.get_attribute("#price", "data-status") == "refused"
        assert page.inner_text("#price") == "Would be refused now: " + e["detail"]
        # coefficients instead of a predicate: the API checks their number
        page.check("input[name=mode][value=coefficients]")
        assert page.is_hidden("#where") and page.is_visible("#coefficients")
        page.fill("#coefficients", "1, 2")
        page.fill("#half-width", "5")
        status, e = ask(page)
        assert status == 400 and "length 200" in e["detail"]
        assert page.inner_text("#error") == e["detail"]
        b3, h3 = api_state(srv)
        assert b3 == b2 and h3 == h2
        assert page.inner_text("#remaining") == fmt_eps(b2["remaining"]["epsilon"])
    finally:
        page.close()

    # the page is self-contained: no request leaves the service, no script error
    assert requests and all(u.startswith(srv.url + "/") for u in requests), requests
    assert page_errors == []
    assert not [m for m in console if re.search(r"Content.Security|Refused to", m)], console


def connect(browser: Any, srv: Server, width: int) -> Any:
    """A page at ``width`` px, connected with a new analyst's key."""
    key = srv.new_analyst()["Authorization"].removeprefix("Bearer ")
    page = browser.new_page(viewport={"width": width, "height": 844})
    page.goto(srv.url + "/")
    page.fill("#api-key", key)
    page.click("#connect")
    page.wait_for_selector("fieldset.attr[data-name=mdvis]")
    page.wait_for_selector("#history-body tr")
    return page


def ticked(page: Any) -> dict[str, list[str]]:
    """The ticked boxes and the chosen bin range of each attribute."""
    return {  # type: ignore[no-any-return]
        **page.eval_on_selector_all(
            "fieldset.attr[data-kind=categories]",
            "els => Object.fromEntries(els.map(e => [e.dataset.name, "
            "[...e.querySelectorAll('input:checked')].map(b => b.value)]))",
        ),
        **page.eval_on_selector_all(
            "fieldset.attr[data-kind=bins]",
            "els => Object.fromEntries(els.map(e => [e.dataset.name, "
            "[e.querySelector('select.from').value, e.querySelector('select.to').value]]))",
        ),
    }


def test_hand_edited_predicate_and_the_choices_agree(browser: Any, own_server: Server) -> None:
    page = connect(browser, own_server, 1180)
    try:
        all_bins = ticked(page)["mdvis"]
        page.check("fieldset[data-name=health] input[value=poor]")
        assert page.input_value("#where") == "health = poor"
        # typed by hand in the language the choices write: the boxes follow it
        page.fill("#where", "health in {fair, good} and year = 2 and mdvis in [1, 6)")
        got = ticked(page)
        assert sorted(got["health"]) == ["fair", "good"] and got["year"] == ["2"]
        assert got["idp"] == [] and got["mdvis"] == ["1", "3"]
        assert page.is_hidden("#where-note")
        # the choices then rebuild the same predicate (they agree with it; values in the
        # domain's order)
        page.check("fieldset[data-name=idp] input[value='1']")
        health = ", ".join(got["health"])
        assert page.input_value("#where") == (
            f"health in {{{health}}} and idp = 1 and year = 2 and mdvis in [1, 6)"
        )
        # a predicate the choices cannot express: they are cleared, and the page says so
        page.fill("#where", "health = poor or idp = 1")
        got = ticked(page)
        assert all(got[a] == [] for a in ("health", "idp", "year")), got
        assert got["mdvis"] == all_bins
        assert page.is_visible("#where-note")
        assert page.input_value("#where") == "health = poor or idp = 1"  # sent as typed
        # an unknown value also clears them
        page.fill("#where", "health = purple")
        assert ticked(page)["health"] == [] and page.is_visible("#where-note")
        # ticking a box again builds the predicate from the boxes
        page.check("fieldset[data-name=health] input[value=poor]")
        assert page.input_value("#where") == "health = poor" and page.is_hidden("#where-note")
    finally:
        page.close()


def test_phone_width_nothing_overflows(browser: Any, own_server: Server) -> None:
    """At 390 px: no sideways scrolling of the page, the key field inside its card, and the
    history's queries wrap at spaces (several characters per line), never per character."""
    srv = own_server
    long_where = "health = fair and idp = 1 and year = 2 and mdvis in [1, 6)"
    r = httpx.post(
        srv.url + "/api/query",
        json={"where": long_where, "half_width": 50, "confidence": 0.9},
        headers=srv.new_analyst(),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    page = connect(browser, srv, 390)
    try:
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        key = page.locator("#api-key").bounding_box()
        card = page.locator("#key-section").bounding_box()
        assert key is not None and card is not None
        assert card["x"] >= 0 and card["x"] + card["width"] <= 390
        assert key["x"] >= card["x"] and key["x"] + key["width"] <= card["x"] + card["width"]
        row = page.locator("#history-body tr").first
        assert row.locator("td").nth(1).inner_text() == long_where
        cell = row.locator("td.query")
        box = cell.bounding_box()
        assert box is not None
        line = float(page.evaluate("parseFloat(getComputedStyle(document.body).lineHeight)"))
        # the query's 58 characters on at most 5 lines (per character: dozens of lines)
        assert box["height"] <= 5 * line + 12, (box, line)
        assert box["width"] >= 100
        # the answer, the price and an error message fit too
        page.fill("#where", long_where)
        page.fill("#half-width", "50")
        page.fill("#confidence", "0.9")
        page.wait_for_selector("#price[data-status=free]")
        ask(page)
        assert page.is_visible("#answer")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        shot = os.environ.get("DPBAYES_WEB_PHONE_SCREENSHOT")
        if shot:
            page.screenshot(path=shot, full_page=True)
    finally:
        page.close()
