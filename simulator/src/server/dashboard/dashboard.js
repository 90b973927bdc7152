// odac-sim dashboard: loads /api/hosts, /api/apps, /api/events/log and /api/reasons once (and
// again at every (re)connection of the event stream, or on `resync`), then applies the payloads
// of /api/events (SSE: host, app, app_deleted, event) to its own state instead of fetching
// everything again. Shows fleet totals, hosts with their GPU detail (model, VRAM, driver, PCI
// address, why a vendor is not schedulable and the fix), filters by host name, vendor and
// reason, and drives PUT /api/apps/{name}/gpu and POST …/restart. The GPU switch only turns
// an app's request off and on again: off remembers the request, on restores it exactly (vendor,
// count, optional) or, for an app that never had one, asks for an optional GPU of any vendor.
// The header counts GPU apps whose GPU need is not met (failed, or running without the GPU
// they asked for) beside the GPUs; a failing app shows one line (reason, what it means, the
// fix from /api/reasons) with the details folded. Times are UTC, as the CLI prints them.
"use strict";

const token = (() => {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) sessionStorage.setItem("odac-token", decodeURIComponent(m[1]));
  return sessionStorage.getItem("odac-token");
})();

// Most host rows rendered at once; the filters narrow the rest.
const MAX_HOST_ROWS = 200;
const MAX_EVENTS = 30;

const state = {
  hosts: new Map(),   // id → Host
  apps: new Map(),    // name → App
  events: [],
  reasons: new Map(), // code → {explanation, fix, fix_by_vendor}
  openDetails: new Set(),
  gpuStats: new Map(), // host id → live GPU figures (gpu_stats.js)
};

// How long a request may go unanswered before it counts as lost in the network.
const ANSWER_MS = 8000;

// Every call is safe to repeat (GETs, the GPU PUT, restarts carrying a request id), so one
// that fails in the network (the browser drops requests in flight when an interface comes or
// goes, e.g. a container's veth) or stays unanswered for ANSWER_MS is tried again, three
// times in all: a request lost on the way never leaves the page waiting for ever.
async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let res, data;
  for (let attempt = 1; ; attempt++) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), ANSWER_MS);
    try {
      res = await fetch(path, {
        method, headers, signal: ctl.signal,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      data = await res.json().catch(e => { if (ctl.signal.aborted) throw e; return null; });
      break;
    } catch (e) {
      if (attempt >= 3) throw ctl.signal.aborted ? new Error(path + ": no answer") : e;
      await new Promise(r => setTimeout(r, 250 * attempt));
    } finally {
      clearTimeout(timer);
    }
  }
  if (!res.ok) throw new Error((data && data.error) || ("http " + res.status));
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}

// A table cell that carries its column name, shown above the value when rows are cards.
function td(label, attrs, ...children) {
  return el("td", Object.assign({ "data-label": label }, attrs || {}), ...children);
}

function request(g) {
  if (!g) return "—";
  const parts = [String(g.runtime ?? g.vendor ?? "auto")];
  if (g.count !== undefined) parts.push("count=" + g.count);
  const opt = g.optional;
  if (opt === true || (typeof opt === "string" && ["true", "1", "yes", "on"].includes(opt.toLowerCase()))) parts.push("optional");
  return parts.join(" ");
}

function attached(a) {
  if (!a) return "—";
  return a.vendor + " (" + a.mechanism + ")" + (a.devices.length ? ": " + a.devices.join(", ") : "");
}

function gib(bytes) {
  if (!bytes) return null;
  const g = bytes / 1073741824;
  return (g >= 10 ? g.toFixed(0) : g.toFixed(1)) + " GiB";
}

// A time as the CLI prints it: UTC, with the zone said.
function utc(ms) {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

// Apps that asked for a GPU and do not have it working: failed or crash-looping, or running
// without the GPU (a fallback). What the header counts.
function gpuFailing(a) {
  if (!a.requested) return false;
  return a.state === "failed" || a.state === "crash_loop" || (!!a.fallback && !a.attached);
}

function fixFor(code, vendor) {
  const r = state.reasons.get(code);
  if (!r) return null;
  return (vendor && r.fix_by_vendor && r.fix_by_vendor[vendor]) || r.fix || null;
}

function say(text, isError) {
  const m = document.getElementById("message");
  m.textContent = text;
  m.className = isError ? "error" : "";
}

// ---- filters ---------------------------------------------------------------------------

function filters() {
  return {
    text: document.getElementById("filter-text").value.trim().toLowerCase(),
    vendor: document.getElementById("filter-vendor").value,
    reason: document.getElementById("filter-reason").value,
  };
}

function hostMatches(h, f) {
  if (f.text && !(h.hostname.toLowerCase().includes(f.text) || h.id.toLowerCase().includes(f.text) ||
      h.apps.some(a => a.toLowerCase().includes(f.text)))) return false;
  if (f.vendor === "none" && h.gpus.length) return false;
  if (f.vendor && f.vendor !== "none" && !h.gpus.some(g => g.vendor === f.vendor)) return false;
  if (f.reason && !Object.values(h.reasons).includes(f.reason)) return false;
  return true;
}

function appMatches(a, f) {
  if (f.text && !(a.name.toLowerCase().includes(f.text) || (a.hostname || "").toLowerCase().includes(f.text) ||
      a.host.toLowerCase().includes(f.text))) return false;
  const h = state.hosts.get(a.host);
  if ((f.vendor || f.reason) && h && !hostMatches(h, Object.assign({}, f, { text: "" }))) return false;
  return true;
}

// ---- rendering ---------------------------------------------------------------------------

function renderTotals() {
  const hosts = [...state.hosts.values()];
  const connected = hosts.filter(h => h.connected).length;
  const byVendor = { nvidia: 0, amd: 0, intel: 0 };
  let gpus = 0, schedulable = 0;
  const reasons = new Map(); // "vendor reason" → {vendor, code, hosts}
  for (const h of hosts) {
    for (const g of h.gpus) {
      byVendor[g.vendor] = (byVendor[g.vendor] || 0) + g.count;
      gpus += g.count;
      if (h.schedulable.includes(g.vendor)) {
        const inv = h.inventory;
        schedulable += inv ? inv.gpus.filter(x => x.vendor === g.vendor && x.passable).length : g.count;
      }
    }
    for (const [vendor, code] of Object.entries(h.reasons)) {
      const k = vendor + " " + code;
      const e = reasons.get(k) || { vendor, code, hosts: 0 };
      e.hosts += 1;
      reasons.set(k, e);
    }
  }
  const apps = [...state.apps.values()];
  const running = apps.filter(a => a.state === "running").length;
  const failed = apps.filter(a => a.state === "failed" || a.state === "crash_loop").length;
  const gpuBad = apps.filter(gpuFailing);
  const badHosts = [...new Set(gpuBad.map(a => a.hostname || a.host))].sort();
  // the failing GPU apps' reasons join the hosts' in the top reasons, counted in apps
  const appReasons = new Map(); // code → {code, vendor, apps, hosts}
  for (const a of gpuBad) {
    const code = a.fallback ? a.fallback.reason : (a.status && a.status.crash ? a.status.crash.reason : a.state);
    const e = appReasons.get(code) || { code, vendor: a.requested.runtime, apps: 0, hosts: new Set() };
    e.apps += 1;
    e.hosts.add(a.hostname || a.host);
    appReasons.set(code, e);
  }
  const total = (id, n, what, bad) => el("div", { class: "total" + (bad ? " bad" : ""), id }, el("span", { class: "n" }, String(n)), el("span", { class: "what" }, what));
  document.getElementById("totals").replaceChildren(
    total("total-hosts", connected + " / " + hosts.length, "hosts connected"),
    total("total-gpus", gpus, "GPUs: " + Object.entries(byVendor).map(([v, n]) => v + " " + n).join(" · ")),
    total("total-schedulable", schedulable + " / " + gpus, "GPUs schedulable" +
      (gpuBad.length ? " · " + gpuBad.length + " GPU app" + (gpuBad.length === 1 ? "" : "s") + " failing" : "")),
    total("total-gpu-failing", gpuBad.length, gpuBad.length
      ? "GPU app" + (gpuBad.length === 1 ? "" : "s") + " failing on " + badHosts.join(", ")
      : "GPU apps failing", gpuBad.length > 0),
    total("total-apps", running + " / " + apps.length, "apps running" + (failed ? " · " + failed + " failed" : ""), failed > 0));
  const top = [...reasons.values()].sort((a, b) => b.hosts - a.hosts || a.code.localeCompare(b.code)).slice(0, 5);
  const topApps = [...appReasons.values()].sort((a, b) => b.apps - a.apps || a.code.localeCompare(b.code)).slice(0, 5);
  document.getElementById("top-reasons-box").hidden = top.length + topApps.length === 0;
  const explain = code => state.reasons.get(code) ? el("span", { class: "detail" }, state.reasons.get(code).explanation) : null;
  document.getElementById("top-reasons").replaceChildren(...topApps.map(r => {
    const fix = fixFor(r.code, r.vendor);
    return el("li", { "data-reason": r.code, "data-kind": "apps" },
      el("strong", {}, "GPU apps: " + r.code), " — " + r.apps + " app" + (r.apps === 1 ? "" : "s") + " on " + [...r.hosts].join(", "),
      explain(r.code), fix ? el("span", { class: "fix" }, fix) : null);
  }), ...top.map(r => {
    const fix = fixFor(r.code, r.vendor);
    return el("li", { "data-reason": r.code },
      el("strong", {}, r.vendor + ": " + r.code), " — " + r.hosts + " host" + (r.hosts === 1 ? "" : "s"),
      explain(r.code), fix ? el("span", { class: "fix" }, fix) : null);
  }));
  // the reason filter offers the reasons present in the fleet
  const select = document.getElementById("filter-reason");
  const codes = [...new Set([...reasons.values()].map(r => r.code))].sort();
  const have = [...select.options].slice(1).map(o => o.value);
  if (codes.join() !== have.join()) {
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "" }, "any"), ...codes.map(c => el("option", { value: c }, c)));
    select.value = codes.includes(chosen) ? chosen : "";
  }
}

// The short digest of what the container really runs (first 12 hex digits of its repo digest),
// as `odac app list` shows it; an image that never came from a registry shows its local image
// id labelled `id:`, never as if it were a digest. The whole value in the tooltip.
function digestTag(status) {
  if (!status) return null;
  const short = v => v.replace(/^sha256:/, "").slice(0, 12);
  if (status.repo_digest) {
    const d = status.repo_digest;
    return el("span", { class: "digest detail", title: d }, "@" + short(d.slice(d.lastIndexOf("@") + 1)));
  }
  if (status.image_id) {
    return el("span", { class: "digest detail", title: "local image id " + status.image_id }, "id:" + short(status.image_id));
  }
  return null;
}

function gpuDetail(h) {
  const inv = h.inventory;
  if (!inv) return el("span", { class: "muted" }, "no inventory yet");
  if (!inv.gpus.length) return el("span", { class: "muted" }, "no GPU on the PCI bus");
  const open = state.openDetails.has(h.id);
  const verdicts = Object.entries(inv.accelerators)
    .filter(([v]) => inv.gpus.some(g => g.vendor === v))
    .map(([v, a]) => el("li", { "data-vendor": v },
      a.schedulable
        ? el("span", {}, v + ": schedulable" + (a.mechanism ? " via " + a.mechanism : ""))
        : el("span", { class: "reason" }, v + ": not schedulable — " + (a.reason || "unknown")),
      a.detail ? el("span", { class: "detail" }, a.detail) : null,
      !a.schedulable && a.reason && fixFor(a.reason, v) ? el("span", { class: "fix" }, fixFor(a.reason, v)) : null));
  return el("details", { open, ontoggle: ev => ev.target.open ? state.openDetails.add(h.id) : state.openDetails.delete(h.id) },
    el("summary", { id: "detail-" + h.id }, inv.gpus.length + " GPU" + (inv.gpus.length === 1 ? "" : "s")),
    el("ul", { class: "gpus" }, ...inv.gpus.map(g => el("li", { class: "gpu" },
      el("strong", {}, g.model), " · ",
      [gib(g.vram_bytes), g.driver ? "driver " + g.driver + (g.driver_version ? " " + g.driver_version : "") : "no driver",
       "PCI " + g.pci_address, g.passable ? "passable" : "not passable"].filter(Boolean).join(" · "),
      gpuFigures(h.id, g.pci_address)))),
    el("ul", { class: "verdicts" }, ...verdicts));
}

// A host's agent update as its agent last reported it: `0.2.0 committed`, `0.2.0 downloading
// 40%`, `0.3.0 update_failed` with the cause below it (the same words as `odac host list`).
function agentUpdate(u) {
  if (!u) return null;
  const pct = u.phase === "downloading" && u.total ? " " + Math.floor((u.bytes || 0) * 100 / u.total) + "%" : "";
  const bad = u.phase === "update_failed" || u.phase === "refused";
  return el("span", { class: "detail" + (bad ? " reason" : "") },
    "update " + (u.version || "?") + " " + u.phase + pct + (u.message ? ": " + u.message : ""));
}

function renderHosts(f) {
  const all = [...state.hosts.values()].sort((a, b) => a.hostname.localeCompare(b.hostname) || a.id.localeCompare(b.id));
  const shown = all.filter(h => hostMatches(h, f));
  const rows = shown.slice(0, MAX_HOST_ROWS);
  const body = document.querySelector("#hosts tbody");
  keepFocus(() => body.replaceChildren(...rows.map(h => {
    const reason = Object.entries(h.reasons).map(([v, r]) => v + ": " + r).join("; ");
    return el("tr", { "data-host": h.id },
      td("Host", {}, h.hostname, el("span", { class: "detail mono" }, h.id)),
      td("Connected", {}, el("span", { class: "pill " + (h.connected ? "on" : "off") }, h.connected ? "connected" : "offline")),
      td("GPUs", {}, h.gpus.length ? h.gpus.map(g => g.vendor + " × " + g.count + " (" + g.models.join(", ") + ")").join("; ") : "—"),
      td("Schedulable", {}, h.schedulable.length ? h.schedulable.join(", ") : "—"),
      td("Reason", { class: reason ? "reason" : "reason none" }, reason || "—"),
      td("Engine", {}, h.engine),
      td("Agent", { class: "agent" }, h.agent_version || "—", agentUpdate(h.update)),
      td("Apps", {}, h.apps.join(", ") || "—"),
      td("GPU detail", { class: "gpu-detail" }, gpuDetail(h)));
  })));
  const more = document.getElementById("hosts-more");
  more.hidden = shown.length <= rows.length;
  more.textContent = "showing " + rows.length + " of " + shown.length + " hosts: search or filter to narrow";
  document.getElementById("hosts-empty").hidden = all.length > 0;
  const filtered = f.text || f.vendor || f.reason;
  document.getElementById("filter-count").textContent = filtered ? shown.length + " of " + all.length + " hosts" : "";
}

// Re-rendering replaces the rows: keep the focused control (by id) focused, so a keyboard
// user's place survives the live updates.
function keepFocus(render) {
  const id = document.activeElement && document.activeElement.id;
  render();
  const again = id && document.getElementById(id);
  if (again && again !== document.activeElement) again.focus({ preventScroll: true });
}

// GPU switches whose PUT is still in flight: name → the state the user chose, so an update
// that lands first does not flip the switch back.
const gpuInFlight = new Map();

function renderApps(f) {
  const apps = [...state.apps.values()].filter(a => appMatches(a, f)).sort((a, b) => a.name.localeCompare(b.name));
  const body = document.querySelector("#apps tbody");
  keepFocus(() => body.replaceChildren(...apps.map(a => {
    const gpuOn = gpuInFlight.has(a.name) ? gpuInFlight.get(a.name) : !!a.requested;
    const kept = remembered(a.name);
    const switchText = gpuOn ? "GPU on: " + request(a.requested) + " (switch off to remove the request)"
      : "GPU off" + (kept ? " (on restores " + request(kept) + ")" : " (on: optional, any vendor)");
    const toggleId = "gpu-" + a.name;
    const fb = a.fallback;
    // a failed pull or build: the app's own reason, not a GPU fallback
    const imageFailure = a.image_failure;
    const failed = a.state === "failed" || a.state === "crash_loop";
    const error = a.status && a.status.last_error;
    const crash = a.state !== "running" && a.status && a.status.crash;
    return el("tr", { "data-app": a.name },
      td("Name", { class: "mono" }, a.name),
      td("Host", {}, a.hostname || a.host),
      td("State", {},
        el("span", { class: "state state-" + a.state }, a.state),
        a.restart_required ? el("span", { class: "badge restart", title: "the running container does not match the spec: restart to apply" }, "restart required") : null,
        healthBadge(a.status && a.status.health)),
      td("Image", { class: "mono" }, a.image || "—", digestTag(a.status)),
      td("GPU requested", { class: "requested mono" }, request(a.requested)),
      td("GPU attached", { class: "attached mono" }, attached(a.attached), appGpuUsage(a)),
      crash ? td("Reason", { class: "reason crash" }, ...crashCell(crash)) :
      td("Reason", { class: fb || imageFailure || (failed && error) ? "reason" : "reason none" },
        ...reasonCell(a, imageFailure ? null : fb, failed, error, imageFailure)),
      td("GPU", {}, el("label", { class: "switch", for: toggleId },
        el("input", { type: "checkbox", id: toggleId, role: "switch", checked: gpuOn, "aria-checked": String(gpuOn),
          "aria-describedby": "gpu-says-" + a.name, onchange: ev => setGpu(a, ev.target.checked) }),
        el("span", {}, "GPU for " + a.name)),
        el("span", { class: "detail switch-text", id: "gpu-says-" + a.name }, switchText)),
      td("Actions", {}, el("button", { type: "button", id: "restart-" + a.name, "aria-label": "Restart " + a.name, onclick: () => restart(a.name) }, "Restart"),
        el("button", { type: "button", id: "logs-" + a.name, "aria-label": "Logs of " + a.name, onclick: () => openLogs(a.name) }, "Logs"),
        el("button", { type: "button", id: "shell-" + a.name, "aria-label": "Shell in " + a.name, onclick: () => openTerminal(a.name) }, "Shell")));
  })));
  document.getElementById("apps-empty").hidden = state.apps.size > 0;
}

// Where a fallback was decided, in words (the status says `preflight` or `engine`).
const TIER_WORDS = { preflight: "found before the start", engine: "refused by the engine" };

// The Reason cell of an app that is not crashed: one line (the code, what it means, the fix),
// the engine's or agent's words folded below it, each text once.
function reasonCell(a, fb, failed, error, imageFailure) {
  // a failed pull or build is the app's own reason (its image_failure part), not a GPU one
  const code = imageFailure ? imageFailure.reason : fb ? fb.reason : (failed && error ? "failed" : null);
  if (!code) return ["—"];
  const info = state.reasons.get(code);
  const vendor = a.requested && a.requested.runtime;
  const fix = imageFailure || fb ? fixFor(code, vendor) : null;
  const head = code + (fb && !a.attached && a.state === "running" ? " (on CPU)" : "") +
    (info ? ": " + info.explanation : "");
  const words = [...new Set([imageFailure && imageFailure.detail, fb && fb.detail, error].filter(Boolean))];
  const where = fb ? (TIER_WORDS[fb.tier] || fb.tier) : null;
  return [el("span", { class: "reason-line" }, head),
    fix ? el("span", { class: "fix" }, fix) : null,
    words.length || where ? el("details", { class: "more" }, el("summary", {}, "details"),
      where ? el("span", { class: "detail" }, where) : null,
      ...words.map(w => el("pre", { class: "words" }, w))) : null];
}

// The health check's verdict next to the state; the failing check's output as its title.
function healthBadge(h) {
  if (!h) return null;
  return el("span", { class: "health" },
    el("span", { class: "badge health-" + h.state, title: h.last_output || "" }, h.state),
    h.last_output ? el("span", { class: "detail health-output" }, h.last_output) : null);
}

// Why an app that is not running stopped: one line (its crash reason, never a GPU reason
// left from before, and what it means), the fix, then exit code, OOM kill, next retry and the
// last lines of its output (folded).
function crashCell(c) {
  const facts = [];
  if (c.exit_code !== undefined && c.exit_code !== null) facts.push("exit " + c.exit_code);
  if (c.oom_killed) facts.push("killed: out of memory");
  facts.push(c.next_retry_at_ms ? "next retry " + utc(c.next_retry_at_ms) : "not restarted");
  const info = state.reasons.get(c.reason);
  return [el("span", { class: "reason-line" }, c.reason + (info ? ": " + info.explanation : "")),
    info && info.fix ? el("span", { class: "fix" }, info.fix) : null,
    el("span", { class: "detail" }, facts.join(", ")),
    c.output_tail ? el("details", { class: "tail" }, el("summary", {}, "last output"), el("pre", {}, c.output_tail)) : null];
}

function renderEvents() {
  const list = document.getElementById("events");
  list.replaceChildren(...state.events.slice(-MAX_EVENTS).reverse().map(e =>
    el("li", { class: e.level }, utc(e.ts_ms) + " — " + (e.app ? e.app + ": " : "") + e.message)));
}

function render() {
  const f = filters();
  renderTotals();
  renderHosts(f);
  renderApps(f);
  renderEvents();
}

// A render replaces the rows: one between a press and its release would put the release on a
// new button, and the click would be lost (the press and the release on different elements).
// Renders wait while a pointer is down, for at most PRESS_MS (a release the page never saw).
const PRESS_MS = 2000;
let pressedAt = 0;
document.addEventListener("pointerdown", () => { pressedAt = Date.now(); }, true);
for (const end of ["pointerup", "pointercancel"]) {
  document.addEventListener(end, () => { pressedAt = 0; }, true);
}
let renderPending = null;
function renderSoon() {
  if (renderPending) return;
  renderPending = setTimeout(() => {
    renderPending = null;
    if (pressedAt && Date.now() - pressedAt < PRESS_MS) renderSoon(); else render();
  }, 80);
}

// ---- actions -----------------------------------------------------------------------------

// The requests the switch turned off, by app (kept for the browser session), so that turning
// it on again restores the same request instead of rewriting vendor or count.
function remembered(name) {
  try { return JSON.parse(sessionStorage.getItem("odac-gpu-off:" + name) || "null"); } catch (_) { return null; }
}

async function setGpu(a, on) {
  const name = a.name;
  const key = "odac-gpu-off:" + name;
  const before = a.requested || null;
  const body = on ? (remembered(name) || true) : false;
  gpuInFlight.set(name, on);
  try {
    const r = await api("PUT", "/api/apps/" + encodeURIComponent(name) + "/gpu", body);
    if (r && r.app) state.apps.set(r.app.name, r.app);
    if (on) sessionStorage.removeItem(key);
    else if (before) sessionStorage.setItem(key, JSON.stringify(before));
    say("app " + name + ": GPU " + (on ? "on: " + request(r && r.app ? r.app.requested : body) : "off") +
        (r.restart_required_to_apply ? " — restart required to apply" : ""));
  } catch (e) { say(e.message, true); }
  gpuInFlight.delete(name);
  renderSoon();
}

async function restart(name) {
  try {
    const request_id = Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
    const a = await api("POST", "/api/apps/" + encodeURIComponent(name) + "/restart", { request_id });
    if (a && a.name) state.apps.set(a.name, a);
    say("restart requested for " + name);
  } catch (e) { say(e.message, true); }
  renderSoon();
}

// ---- loading and the event stream --------------------------------------------------------

let loadFailed = null;
// The whole state, fetched: at start, at every (re)connection of the event stream (changes
// made while it was down are not replayed) and on `resync`.
// Live changes applied since the page opened: a snapshot fetched while one arrived may be older
// than it, and must not overwrite it.
let liveApplied = 0;

async function load() {
  try {
    let snapshot;
    for (let attempt = 0; ; attempt++) {
      const seen = liveApplied;
      snapshot = await Promise.all([
        api("GET", "/api/hosts"), api("GET", "/api/apps"), api("GET", "/api/events/log"),
        state.reasons.size ? null : api("GET", "/api/reasons").catch(() => []),
        api("GET", "/api/gpu-stats").catch(() => [])]);
      if (liveApplied === seen || attempt >= 2) break;
    }
    const [hosts, apps, events, reasons, gpuStats] = snapshot;
    state.gpuStats = new Map(gpuStats.map(s => [s.host, s]));
    state.hosts = new Map(hosts.map(h => [h.id, h]));
    state.apps = new Map(apps.map(a => [a.name, a]));
    state.events = events.slice(-MAX_EVENTS);
    if (reasons) state.reasons = new Map(reasons.map(r => [r.code, r]));
    render();
    // the page has shown the fleet once (the browser tests wait for this)
    document.body.dataset.state = "loaded";
    // a load that works again clears the error an earlier one showed
    const m = document.getElementById("message");
    if (loadFailed !== null && m.className === "error" && m.textContent === loadFailed) say("");
    loadFailed = null;
  } catch (e) {
    loadFailed = e.message;
    say(e.message, true);
  }
}

// One SSE message applied to the state; true when it asks for a full load.
function apply(kind, data) {
  switch (kind) {
    case "host": if (data && data.id) state.hosts.set(data.id, data); break;
    case "app":
      if (data && data.name) state.apps.set(data.name, data);
      break;
    case "app_deleted": if (data && data.name) state.apps.delete(data.name); break;
    case "gpu_stats": if (data && data.host) state.gpuStats.set(data.host, data); break;
    case "event":
      if (data) {
        state.events.push(data);
        if (state.events.length > MAX_EVENTS) state.events.splice(0, state.events.length - MAX_EVENTS);
      }
      break;
    case "resync": return true;
    default: return false;
  }
  liveApplied++;
  renderSoon();
  return false;
}

function parseBlock(block) {
  let kind = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
    if (field === "event") kind = value.trim();
    else if (field === "data") data.push(value);
  }
  let payload = null;
  if (data.length) {
    try { payload = JSON.parse(data.join("\n")); } catch (_) { payload = null; }
  }
  return { kind, payload };
}

// The event stream is read with fetch, not EventSource: EventSource cannot send the API token
// (`--api-token`), so with a token the page would never go live. Reconnects with backoff.
async function follow(pill) {
  const headers = { "Accept": "text/event-stream" };
  if (token) headers["Authorization"] = "Bearer " + token;
  // a stream that does not say hello within ANSWER_MS is given up and opened again
  const ctl = new AbortController();
  let hello = setTimeout(() => ctl.abort(), ANSWER_MS);
  try {
    await followOn(pill, headers, ctl, () => { clearTimeout(hello); hello = null; });
  } finally {
    if (hello) clearTimeout(hello);
  }
}

async function followOn(pill, headers, ctl, greeted) {
  const res = await fetch("/api/events", { headers, cache: "no-store", signal: ctl.signal });
  if (!res.ok || !res.body) {
    const data = await res.json().catch(() => null);
    throw new Error("event stream: " + ((data && data.error) || ("http " + res.status)));
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const { kind, payload } = parseBlock(buf.slice(0, end));
      buf = buf.slice(end + 2);
      if (kind === "hello") {
        greeted();
        pill.textContent = "live";
        pill.className = "pill on";
        const m = document.getElementById("message");
        if (m.className === "error" && m.textContent.startsWith("event stream:")) say("");
        load();
      } else if (kind && apply(kind, payload)) {
        load();
      }
    }
  }
}

async function live() {
  const pill = document.getElementById("live");
  let delay = 500;
  for (;;) {
    const started = Date.now();
    try {
      await follow(pill);
    } catch (e) {
      if (e.message.startsWith("event stream:")) say(e.message, true);
    }
    pill.textContent = "reconnecting…";
    pill.className = "pill off";
    if (Date.now() - started > 10000) delay = 500;
    await new Promise(r => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10000);
  }
}

for (const id of ["filter-text", "filter-vendor", "filter-reason"]) {
  document.getElementById(id).addEventListener("input", render);
}
load();
live();
