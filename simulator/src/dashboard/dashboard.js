// odac-sim dashboard: renders /api/hosts and /api/apps, follows /api/events (SSE), and drives
// PUT /api/apps/{name}/gpu (toggle: on = optional GPU, automatic vendor) and POST …/restart.
"use strict";

const token = (() => {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) sessionStorage.setItem("odac-token", decodeURIComponent(m[1]));
  return sessionStorage.getItem("odac-token");
})();

// Every call is safe to repeat (GETs, the GPU PUT, restarts carrying a request id), so one
// that fails in the network (the browser drops requests in flight when an interface comes or
// goes, e.g. a container's veth) is tried again, three times in all.
async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
  let res;
  for (let attempt = 1; ; attempt++) {
    try {
      res = await fetch(path, init);
      break;
    } catch (e) {
      if (attempt >= 3) throw e;
      await new Promise(r => setTimeout(r, 250 * attempt));
    }
  }
  const data = await res.json().catch(() => null);
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
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
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

function say(text, isError) {
  const m = document.getElementById("message");
  m.textContent = text;
  m.className = isError ? "error" : "";
}

function renderHosts(hosts) {
  const body = document.querySelector("#hosts tbody");
  body.replaceChildren(...hosts.map(h => {
    const reason = Object.entries(h.reasons).map(([v, r]) => v + ": " + r).join("; ") ||
      (h.inventory && !h.gpus.length ? "no_device" : "");
    return el("tr", { "data-host": h.id },
      el("td", {}, h.hostname, el("span", { class: "detail mono" }, h.id)),
      el("td", {}, el("span", { class: "pill " + (h.connected ? "on" : "off") }, h.connected ? "connected" : "offline")),
      el("td", {}, h.gpus.length ? h.gpus.map(g => g.vendor + " × " + g.count + " (" + g.models.join(", ") + ")").join("; ") : "—"),
      el("td", {}, h.schedulable.length ? h.schedulable.join(", ") : "—"),
      el("td", { class: reason ? "reason" : "reason none" }, reason || "—"),
      el("td", {}, h.engine),
      el("td", {}, h.apps.join(", ") || "—"));
  }));
  document.getElementById("hosts-empty").hidden = hosts.length > 0;
}

// Re-rendering replaces the rows: keep the focused control (by id) focused, so a keyboard
// user's place survives the live updates.
function keepFocus(render) {
  const id = document.activeElement && document.activeElement.id;
  render();
  const again = id && document.getElementById(id);
  if (again && again !== document.activeElement) again.focus({ preventScroll: true });
}

// GPU switches whose PUT is still in flight: name → the state the user chose, so a refresh
// that lands first does not flip the switch back.
const gpuInFlight = new Map();

function renderApps(apps) {
  const body = document.querySelector("#apps tbody");
  keepFocus(() => body.replaceChildren(...apps.map(a => {
    const gpuOn = gpuInFlight.has(a.name) ? gpuInFlight.get(a.name) : !!a.requested;
    const toggleId = "gpu-" + a.name;
    const fb = a.fallback;
    return el("tr", { "data-app": a.name },
      el("td", { class: "mono" }, a.name),
      el("td", {}, a.hostname || a.host),
      el("td", {},
        el("span", { class: "state state-" + a.state }, a.state),
        a.restart_required ? el("span", { class: "badge restart", title: "the running container does not match the spec: restart to apply" }, "restart required") : null),
      el("td", { class: "mono" }, a.image || "—"),
      el("td", { class: "requested mono" }, request(a.requested)),
      el("td", { class: "attached mono" }, attached(a.attached)),
      el("td", { class: fb ? "reason" : "reason none" }, fb ? fb.reason + (a.attached ? "" : (a.state === "running" ? " (on CPU)" : "")) : "—",
        fb ? el("span", { class: "detail" }, fb.tier + (fb.detail ? ": " + fb.detail : "")) : null,
        a.status && a.status.last_error ? el("span", { class: "detail" }, a.status.last_error) : null),
      el("td", {}, el("label", { class: "switch", for: toggleId },
        el("input", { type: "checkbox", id: toggleId, role: "switch", checked: gpuOn, "aria-checked": String(gpuOn),
          onchange: ev => setGpu(a.name, ev.target.checked) }),
        el("span", {}, "GPU for " + a.name))),
      el("td", {}, el("button", { type: "button", id: "restart-" + a.name, "aria-label": "Restart " + a.name, onclick: () => restart(a.name) }, "Restart")));
  })));
  document.getElementById("apps-empty").hidden = apps.length > 0;
}

function renderEvents(events) {
  const list = document.getElementById("events");
  list.replaceChildren(...events.slice(-30).reverse().map(e =>
    el("li", { class: e.level }, new Date(e.ts_ms).toLocaleTimeString() + " — " + (e.app ? e.app + ": " : "") + e.message)));
}

async function setGpu(name, on) {
  gpuInFlight.set(name, on);
  try {
    const r = await api("PUT", "/api/apps/" + encodeURIComponent(name) + "/gpu", on ? true : false);
    say("app " + name + ": GPU " + (on ? "on (optional, automatic vendor)" : "off") +
        (r.restart_required_to_apply ? " — restart required to apply" : ""));
  } catch (e) { say(e.message, true); }
  gpuInFlight.delete(name);
  refresh();
}

async function restart(name) {
  try {
    const request_id = Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
    await api("POST", "/api/apps/" + encodeURIComponent(name) + "/restart", { request_id });
    say("restart requested for " + name);
  } catch (e) { say(e.message, true); }
  refresh();
}

let pending = null;
let refreshFailed = null;
async function refresh() {
  try {
    const [hosts, apps, events] = await Promise.all([api("GET", "/api/hosts"), api("GET", "/api/apps"), api("GET", "/api/events/log")]);
    renderHosts(hosts);
    renderApps(apps);
    renderEvents(events);
    // a refresh that works again clears the error an earlier refresh showed
    const m = document.getElementById("message");
    if (refreshFailed !== null && m.className === "error" && m.textContent === refreshFailed) say("");
    refreshFailed = null;
  } catch (e) {
    refreshFailed = e.message;
    say(e.message, true);
  }
}
function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 80);
}

// The event stream is read with fetch, not EventSource: EventSource cannot send the API token
// (`--api-token`), so with a token the page would never go live. Reconnects with backoff.
const EVENT_KINDS = new Set(["hello", "host", "app", "app_deleted", "event", "faults", "resync"]);

function sseKind(block) {
  // one SSE message: the `event:` field names it (comment-only blocks are keep-alives)
  const m = block.match(/^event:\s?(.*)$/m);
  return m ? m[1].trim() : null;
}

async function follow(pill) {
  const headers = { "Accept": "text/event-stream" };
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch("/api/events", { headers, cache: "no-store" });
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
      const kind = sseKind(buf.slice(0, end));
      buf = buf.slice(end + 2);
      if (kind === "hello") {
        pill.textContent = "live";
        pill.className = "pill on";
        const m = document.getElementById("message");
        if (m.className === "error" && m.textContent.startsWith("event stream:")) say("");
      }
      if (EVENT_KINDS.has(kind)) soon();
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

refresh();
live();
setInterval(refresh, 15000);
