// odac-sim dashboard: renders /api/hosts and /api/apps, follows /api/events (SSE), and drives
// PUT /api/apps/{name}/gpu (toggle: on = optional GPU, automatic vendor) and POST …/restart.
"use strict";

const token = (() => {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) sessionStorage.setItem("odac-token", decodeURIComponent(m[1]));
  return sessionStorage.getItem("odac-token");
})();

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (token) headers["Authorization"] = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
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
  body.replaceChildren(...hosts.map(h => el("tr", { "data-host": h.id },
    el("td", {}, h.hostname, el("span", { class: "detail mono" }, h.id)),
    el("td", {}, el("span", { class: "pill " + (h.connected ? "on" : "off") }, h.connected ? "connected" : "offline")),
    el("td", {}, h.gpus.length ? h.gpus.map(g => g.vendor + " × " + g.count + " (" + g.models.join(", ") + ")").join("; ") : "—"),
    el("td", {}, h.schedulable.length ? h.schedulable.join(", ") : "—"),
    el("td", { class: "reason" }, Object.entries(h.reasons).map(([v, r]) => v + ": " + r).join("; ") || (h.inventory && !h.gpus.length ? "no_device" : "—")),
    el("td", {}, h.engine),
    el("td", {}, h.apps.join(", ") || "—"))));
  document.getElementById("hosts-empty").hidden = hosts.length > 0;
}

function renderApps(apps) {
  const body = document.querySelector("#apps tbody");
  body.replaceChildren(...apps.map(a => {
    const gpuOn = !!a.requested;
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
      el("td", { class: "reason" }, fb ? fb.reason + (a.attached ? "" : (a.state === "running" ? " (on CPU)" : "")) : "—",
        fb ? el("span", { class: "detail" }, fb.tier + (fb.detail ? ": " + fb.detail : "")) : null,
        a.status && a.status.last_error ? el("span", { class: "detail" }, a.status.last_error) : null),
      el("td", {}, el("label", { class: "switch", for: toggleId },
        el("input", { type: "checkbox", id: toggleId, role: "switch", checked: gpuOn, "aria-checked": String(gpuOn),
          onchange: ev => setGpu(a.name, ev.target.checked) }),
        el("span", {}, "GPU for " + a.name))),
      el("td", {}, el("button", { type: "button", "aria-label": "Restart " + a.name, onclick: () => restart(a.name) }, "Restart")));
  }));
  document.getElementById("apps-empty").hidden = apps.length > 0;
}

function renderEvents(events) {
  const list = document.getElementById("events");
  list.replaceChildren(...events.slice(-30).reverse().map(e =>
    el("li", { class: e.level }, new Date(e.ts_ms).toLocaleTimeString() + " — " + (e.app ? e.app + ": " : "") + e.message)));
}

async function setGpu(name, on) {
  try {
    const r = await api("PUT", "/api/apps/" + encodeURIComponent(name) + "/gpu", on ? true : false);
    say("app " + name + ": GPU " + (on ? "on (optional, automatic vendor)" : "off") +
        (r.restart_required_to_apply ? " — restart required to apply" : ""));
  } catch (e) { say(e.message, true); }
  refresh();
}

async function restart(name) {
  try {
    await api("POST", "/api/apps/" + encodeURIComponent(name) + "/restart");
    say("restart requested for " + name);
  } catch (e) { say(e.message, true); }
  refresh();
}

let pending = null;
async function refresh() {
  try {
    const [hosts, apps, events] = await Promise.all([api("GET", "/api/hosts"), api("GET", "/api/apps"), api("GET", "/api/events/log")]);
    renderHosts(hosts);
    renderApps(apps);
    renderEvents(events);
  } catch (e) { say(e.message, true); }
}
function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 80);
}

function live() {
  const pill = document.getElementById("live");
  const es = new EventSource("/api/events");
  es.addEventListener("hello", () => { pill.textContent = "live"; pill.className = "pill on"; soon(); });
  for (const kind of ["host", "app", "app_deleted", "event", "faults", "resync"]) es.addEventListener(kind, soon);
  es.onerror = () => { pill.textContent = "reconnecting…"; pill.className = "pill off"; };
}

refresh();
live();
setInterval(refresh, 15000);
