// The analysts' page of the dpbayes query service: plain JS, no build step, no network
// beyond this server. Talks to /api/schema, /api/quote, /api/query, /api/history and
// /api/budget with the analyst's key; every value shown comes from the API (text nodes only,
// never HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const KEY_STORE = "dpbayes.apiKey";
let apiKey = "";
let schema = null;
let budgetAccounting = "basic"; // the service's composition, from /api/budget

// ------------------------------------------------------------------ API
async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + apiKey } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (err) {
    throw new Error("cannot reach the service: " + err.message);
  }
  let data = null;
  try {
    data = await resp.json();
  } catch (_err) {
    data = null;
  }
  if (!resp.ok) {
    const detail = data && typeof data.detail === "string" ? data.detail : resp.statusText;
    const e = new Error(detail || "HTTP " + resp.status);
    e.status = resp.status;
    e.data = data;
    throw e;
  }
  return data;
}

function showError(msg) {
  const box = $("error");
  box.textContent = msg;
  box.hidden = !msg;
}

// ------------------------------------------------------------------ formatting
function fmt(x, digits = 2) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
function fmtEps(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  if (x === 0) return "0";
  return Math.abs(x) >= 0.01 ? x.toFixed(4) : x.toExponential(3);
}
function fmtTime(t) {
  return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
}
function quote(v) {
  const s = String(v);
  return /^[A-Za-z0-9_.+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "") + "'";
}

// ------------------------------------------------------------------ composing
function renderAttributes() {
  const box = $("attributes");
  box.replaceChildren();
  for (const attr of schema.attributes) {
    const fs = document.createElement("fieldset");
    fs.className = "attr";
    fs.dataset.name = attr.name;
    fs.dataset.kind = attr.kind;
    const legend = document.createElement("legend");
    legend.textContent = attr.name;
    fs.append(legend);
    if (attr.kind === "bins") {
      // a contiguous range of bins: from edge ... to edge
      const edges = attr.edges.map(String);
      const from = document.createElement("select");
      const to = document.createElement("select");
      from.className = "from";
      to.className = "to";
      edges.slice(0, -1).forEach((e, i) => from.add(new Option("≥ " + e, String(i))));
      edges.slice(1).forEach((e, i) => to.add(new Option("< " + e, String(i + 1))));
      to.value = String(edges.length - 1);
      for (const [lab, sel] of [["from", from], ["to", to]]) {
        const l = document.createElement("label");
        l.append(lab + " ", sel);
        fs.append(l);
      }
      fs._edges = edges;
    } else {
      for (const v of attr.values) {
        const l = document.createElement("label");
        l.className = "chip";
        const cb = document.createElement("input");
        cb.type = "checkbox";
        cb.value = String(v);
        l.append(cb, " " + String(v));
        fs.append(l);
      }
      const hint = document.createElement("span");
      hint.className = "muted small";
      hint.textContent = "none ticked = any";
      fs.append(hint);
    }
    box.append(fs);
  }
  $("n-cells").textContent = "(" + schema.n_cells + " cells, C order over " +
    schema.attributes.map((a) => a.name).join(" × ") + ")";
  composeWhere();
}

function composeWhere() {
  $("where-note").hidden = true;
  const clauses = [];
  for (const fs of document.querySelectorAll("#attributes fieldset.attr")) {
    const name = fs.dataset.name;
    if (fs.dataset.kind === "bins") {
      const lo = Number(fs.querySelector("select.from").value);
      const hi = Number(fs.querySelector("select.to").value);
      const edges = fs._edges;
      if (hi <= lo) {
        clauses.push(name + " in [" + edges[lo] + ", " + edges[lo] + ")"); // the API says why
      } else if (lo > 0 || hi < edges.length - 1) {
        clauses.push(name + " in [" + edges[lo] + ", " + edges[hi] + ")");
      }
    } else {
      const boxes = [...fs.querySelectorAll("input[type=checkbox]")];
      const on = boxes.filter((b) => b.checked).map((b) => quote(b.value));
      if (on.length === 1) clauses.push(name + " = " + on[0]);
      else if (on.length > 1 && on.length < boxes.length) {
        clauses.push(name + " in {" + on.join(", ") + "}");
      }
    }
  }
  $("where").value = clauses.join(" and ");
}

// A hand-edited predicate: tick the choices that say the same, or clear them all (with a
// note) when the choices cannot express it. Parses what composeWhere writes:
// "a = v", "a in {v, w}", "a in [lo, hi)", joined by "and".
function unquote(v) {
  const s = v.trim();
  return s.length >= 2 && s[0] === "'" && s[s.length - 1] === "'" ? s.slice(1, -1) : s;
}

function parseWhere(text) {
  const out = new Map();
  if (text.trim() === "") return out;
  for (const clause of text.trim().split(/\s+and\s+/)) {
    let m = clause.match(/^([A-Za-z_][\w.]*)\s*=\s*(.+)$/);
    if (m) {
      if (out.has(m[1])) return null;
      out.set(m[1], { values: [unquote(m[2])] });
      continue;
    }
    m = clause.match(/^([A-Za-z_][\w.]*)\s+in\s+\{(.*)\}$/);
    if (m) {
      if (out.has(m[1])) return null;
      out.set(m[1], { values: m[2].split(",").map(unquote).filter((v) => v !== "") });
      continue;
    }
    m = clause.match(/^([A-Za-z_][\w.]*)\s+in\s+\[([^,\]]+),([^)\]]+)\)$/);
    if (m) {
      if (out.has(m[1])) return null;
      out.set(m[1], { range: [m[2].trim(), m[3].trim()] });
      continue;
    }
    return null;
  }
  return out;
}

function syncChoices() {
  const parsed = parseWhere($("where").value);
  const sets = document.querySelectorAll("#attributes fieldset.attr");
  const names = new Set([...sets].map((fs) => fs.dataset.name));
  let ok = parsed !== null && [...parsed.keys()].every((n) => names.has(n));
  const plan = [];
  for (const fs of sets) {
    const want = ok ? parsed.get(fs.dataset.name) : undefined;
    if (fs.dataset.kind === "bins") {
      const edges = fs._edges;
      let lo = 0, hi = edges.length - 1;
      if (want) {
        lo = want.range ? edges.indexOf(want.range[0]) : -1;
        hi = want.range ? edges.indexOf(want.range[1]) : -1;
        if (lo < 0 || hi <= lo) ok = false;
      }
      plan.push(() => {
        fs.querySelector("select.from").value = String(ok ? lo : 0);
        fs.querySelector("select.to").value = String(ok ? hi : edges.length - 1);
      });
    } else {
      const boxes = [...fs.querySelectorAll("input[type=checkbox]")];
      const values = boxes.map((b) => b.value);
      if (want && (!want.values || !want.values.length ||
          want.values.some((v) => !values.includes(v)))) ok = false;
      plan.push(() => {
        for (const b of boxes) b.checked = ok && !!want && want.values.includes(b.value);
      });
    }
  }
  plan.forEach((f) => f());
  $("where-note").hidden = ok;
}

function readQuery() {
  const body = {
    half_width: Number($("half-width").value === "" ? NaN : $("half-width").value),
    confidence: Number($("confidence").value === "" ? NaN : $("confidence").value),
  };
  // JSON has no NaN: send null and let the API say which field is wrong
  for (const k of ["half_width", "confidence"]) if (!Number.isFinite(body[k])) body[k] = null;
  const mode = document.querySelector("input[name=mode]:checked").value;
  if (mode === "coefficients") {
    const parts = $("coefficients").value.split(/[\s,;]+/).filter((s) => s !== "");
    body.coefficients = parts.map((s) => (Number.isFinite(Number(s)) ? Number(s) : null));
  } else {
    body.where = $("where").value.trim();
  }
  return body;
}

// ------------------------------------------------------------------ showing
function showAnswer(a) {
  $("answer").hidden = false;
  $("answer-query").textContent = a.query;
  $("estimate").textContent = fmt(a.estimate);
  $("interval").textContent = a.interval
    ? "[" + fmt(a.interval[0]) + ", " + fmt(a.interval[1]) + "] (± " + fmt(a.half_width) + ")"
    : "–";
  $("confidence-reached").textContent =
    fmt(100 * a.confidence_reached, 2) + " % (required " + fmt(100 * a.confidence_required, 2) + " %)";
  $("eps-spent").textContent = fmtEps(a.epsilon_spent);
  const src = $("source");
  src.className = a.free_from_history ? "badge free" : "badge fresh";
  src.textContent = a.free_from_history
    ? "free: from the history, no budget spent"
    : "fresh: budget spent";
  $("guarantee").textContent = a.guarantee || "–";
  drawDensity($("density"), a);
}

function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function niceTicks(lo, hi, n) {
  const span = hi - lo;
  const step0 = span / n;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= n) || 10 * mag;
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) out.push(t);
  return out;
}

function drawDensity(el, a) {
  el.replaceChildren();
  const d = a.density;
  if (!d || !d.x || d.x.length < 2) {
    el.append(svg("text", { x: 280, y: 120, "text-anchor": "middle", class: "axis" },
      "no density returned for this answer"));
    el.dataset.points = "0";
    return;
  }
  const W = 560, H = 240, L = 16, R = 16, T = 14, B = 30;
  const x0 = d.x[0], x1 = d.x[d.x.length - 1];
  const ymax = Math.max(...d.pdf) || 1;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - (y / ymax) * (H - T - B) * 0.95;
  const pts = d.x.map((x, i) => [sx(x), sy(d.pdf[i])]);
  const [lo, hi] = a.interval;
  // shaded interval: the area under the curve between lo and hi
  const inside = pts.filter((_p, i) => d.x[i] >= lo && d.x[i] <= hi);
  if (inside.length) {
    const area = [[sx(lo), sy(0)], ...inside, [sx(hi), sy(0)]];
    el.append(svg("polygon", { points: area.map((p) => p.join(",")).join(" "), class: "interval" }));
  }
  el.append(svg("line", { x1: L, x2: W - R, y1: sy(0), y2: sy(0), class: "axis-line" }));
  for (const t of niceTicks(x0, x1, 6)) {
    el.append(svg("line", { x1: sx(t), x2: sx(t), y1: sy(0), y2: sy(0) + 4, class: "axis-line" }));
    el.append(svg("text", { x: sx(t), y: H - 10, "text-anchor": "middle", class: "axis" },
      t.toLocaleString("en-US")));
  }
  el.append(svg("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: "curve" }));
  for (const [x, cls] of [[lo, "bound"], [hi, "bound"], [a.estimate, "estimate"]]) {
    el.append(svg("line", { x1: sx(x), x2: sx(x), y1: T, y2: sy(0), class: cls }));
  }
  el.dataset.points = String(pts.length);
}

async function refreshBudget() {
  const b = await api("GET", "/api/budget");
  $("remaining").textContent = fmtEps(b.remaining.epsilon);
  $("spent").textContent = fmtEps(b.spent.epsilon);
  $("total").textContent = fmtEps(b.total.epsilon);
  $("n-answers").textContent = String(b.answers);
  const frac = b.total.epsilon > 0 ? b.remaining.epsilon / b.total.epsilon : 0;
  $("budget-bar").style.width = (100 * Math.max(0, Math.min(1, frac))).toFixed(1) + "%";
  budgetAccounting = b.accounting || "basic";
  $("composition").textContent = "Accounting: " + (b.composition || "");
  return b;
}

async function refreshHistory(nAnswers) {
  const limit = 50;
  const offset = Math.max(0, nAnswers - limit);
  const h = await api("GET", "/api/history?offset=" + offset + "&limit=" + limit);
  const body = $("history-body");
  body.replaceChildren();
  const rows = h.answers.slice().reverse();
  if (!rows.length) {
    const tr = body.insertRow();
    const td = tr.insertCell();
    td.colSpan = 6;
    td.className = "muted";
    td.textContent = "no answers released yet";
  }
  for (const r of rows) {
    const tr = body.insertRow();
    tr.dataset.id = String(r.id);
    const cells = [String(r.id), r.query, fmt(r.noisy_answer), fmtEps(r.epsilon), r.analyst,
      fmtTime(r.created)];
    cells.forEach((c, i) => {
      const td = tr.insertCell();
      td.textContent = c;
      if (i === 2 || i === 3) td.className = "num";
      if (i === 1) td.className = "query";
    });
  }
}

async function refresh() {
  const b = await refreshBudget();
  await refreshHistory(b.answers);
  await showPrice();
}

// ------------------------------------------------------------------ the price before Ask
let priceSeq = 0;
let priceTimer = 0;

function setPrice(status, text, eps) {
  const el = $("price");
  el.dataset.status = status;
  el.dataset.epsilon = eps === null || eps === undefined ? "" : String(eps);
  el.textContent = text;
}

async function showPrice() {
  if (!schema) return;
  const seq = ++priceSeq;
  setPrice("pending", "Price: …");
  let text, status, eps = null;
  try {
    const qt = await api("POST", "/api/quote", readQuery());
    status = qt.status;
    eps = qt.epsilon;
    if (qt.status === "free") text = "Price now: free (from the history; no budget spent, no noise drawn)";
    else if (qt.status === "fresh") {
      text = "Price now: ε = " + fmtEps(qt.epsilon) + " (one fresh answer";
      if (budgetAccounting && budgetAccounting !== "basic" && qt.spent_after_epsilon !== null)
        text += "; spent ε would become " + fmtEps(qt.spent_after_epsilon);
      text += ")";
    }
    else text = "Would be refused now: " + qt.reason;
  } catch (err) {
    status = "invalid";
    text = "Price: – (" + err.message + ")";
  }
  if (seq === priceSeq) setPrice(status, text, eps); // only the latest request's price
}

function priceSoon() {
  clearTimeout(priceTimer);
  if (!schema) return; // not connected yet: no price to ask for
  setPrice("pending", "Price: …");
  priceTimer = setTimeout(showPrice, 250);
}

// ------------------------------------------------------------------ events
async function connect(ev) {
  if (ev) ev.preventDefault();
  apiKey = $("api-key").value.trim();
  showError("");
  $("ask").disabled = true;
  try {
    schema = await api("GET", "/api/schema");
    sessionStorage.setItem(KEY_STORE, apiKey);
    $("who").textContent = "connected";
    renderAttributes();
    await refresh();
    $("ask").disabled = false;
  } catch (err) {
    $("who").textContent = "";
    showError(err.message);
  }
}

async function ask(ev) {
  ev.preventDefault();
  // the refresh below prices the current query; a debounced quote still waiting would
  // otherwise fire after it and leave the price "pending" once Ask is enabled again
  clearTimeout(priceTimer);
  showError("");
  const btn = $("ask");
  btn.disabled = true; // enabled again once the answer, budget and history are all shown
  let msg = "";
  try {
    showAnswer(await api("POST", "/api/query", { ...readQuery(), density: true }));
  } catch (err) {
    msg = err.message;
    if (err.data && err.data.status === "refused" && !/nothing (was )?spent/.test(msg)) {
      msg += " (nothing was spent)";
    }
    $("answer").hidden = true; // never leave an earlier answer next to this error
  }
  try {
    await refresh();
  } catch (err) {
    msg = msg || err.message;
  }
  showError(msg);
  btn.disabled = false;
}

function switchMode() {
  const coef = document.querySelector("input[name=mode]:checked").value === "coefficients";
  $("coefficients-mode").hidden = !coef;
  $("predicate-mode").hidden = coef;
  priceSoon();
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", connect);
  $("query-form").addEventListener("submit", ask);
  $("attributes").addEventListener("change", () => {
    composeWhere();
    priceSoon();
  });
  $("where").addEventListener("input", () => {
    syncChoices();
    priceSoon();
  });
  for (const id of ["coefficients", "half-width", "confidence"]) {
    $(id).addEventListener("input", priceSoon);
  }
  for (const r of document.querySelectorAll("input[name=mode]")) r.addEventListener("change", switchMode);
  const saved = sessionStorage.getItem(KEY_STORE);
  if (saved) {
    $("api-key").value = saved;
    connect();
  }
});
