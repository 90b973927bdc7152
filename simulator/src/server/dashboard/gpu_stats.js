// odac-sim dashboard, live GPU figures: per-GPU bars (utilisation, VRAM) with a one-hour
// sparkline of utilisation, and per-app GPU usage, from GET /api/gpu-stats (loaded with the rest)
// and the `gpu_stats` SSE event (one host's figures). dashboard.js calls gpuFigures() in the
// host GPU detail, appGpuUsage() in the apps table and keeps state.gpuStats (host id → figures).
"use strict";

const SPARK_W = 120, SPARK_H = 24, HOUR_MS = 3600000;

function gpuSeries(hostId, gpuId) {
  const s = state.gpuStats && state.gpuStats.get(hostId);
  return s ? s.gpus.find(g => g.id === gpuId) || null : null;
}

function bar(label, pct, text, cls) {
  const p = Math.max(0, Math.min(100, pct));
  return el("span", { class: "gbar " + cls, role: "meter", "aria-label": label, "aria-valuemin": "0",
      "aria-valuemax": "100", "aria-valuenow": String(Math.round(p)) },
    el("span", { class: "gbar-fill", style: "width:" + p.toFixed(1) + "%" }),
    el("span", { class: "gbar-text" }, text));
}

// Utilisation over the last hour as an SVG step line (points arrive only when a figure moved).
function sparkline(history, now) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + SPARK_W + " " + SPARK_H);
  svg.setAttribute("width", SPARK_W);
  svg.setAttribute("height", SPARK_H);
  svg.setAttribute("role", "img");
  const pts = history.filter(p => p.util !== null && p.util !== undefined);
  svg.setAttribute("aria-label", "utilisation, last hour: " + pts.map(p => p.util + "%").join(" "));
  svg.setAttribute("data-points", String(pts.length));
  if (!pts.length) return svg;
  const x = t => Math.max(0, Math.min(SPARK_W, SPARK_W - (now - t) / HOUR_MS * SPARK_W));
  const y = u => SPARK_H - 1 - u / 100 * (SPARK_H - 2);
  let d = "M" + x(pts[0].t_ms).toFixed(1) + " " + y(pts[0].util).toFixed(1);
  for (let i = 1; i < pts.length; i++) {
    d += " H" + x(pts[i].t_ms).toFixed(1) + " V" + y(pts[i].util).toFixed(1);
  }
  d += " H" + SPARK_W;
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", d);
  svg.append(path);
  return svg;
}

// The live figures of one GPU for the host detail; null before its first report.
function gpuFigures(hostId, gpuId) {
  const s = gpuSeries(hostId, gpuId);
  if (!s) return null;
  const c = s.current;
  const parts = [];
  if (c.util !== undefined && c.util !== null) parts.push(bar("utilisation " + gpuId, c.util, c.util + " %", "util"));
  if (c.vram_used_mib !== undefined && c.vram_used_mib !== null) {
    const total = c.vram_total_mib || 0;
    parts.push(bar("vram " + gpuId, total ? c.vram_used_mib / total * 100 : 0,
      c.vram_used_mib + (total ? " / " + total : "") + " MiB", "vram"));
  }
  const extra = [c.temp_c !== undefined && c.temp_c !== null ? c.temp_c + " °C" : null,
    c.power_w !== undefined && c.power_w !== null ? c.power_w + " W" : null,
    c.clock_mhz !== undefined && c.clock_mhz !== null ? c.clock_mhz + " MHz" : null].filter(Boolean);
  return el("span", { class: "gpu-live", "data-gpu": gpuId }, ...parts,
    extra.length ? el("span", { class: "detail" }, extra.join(" · ")) : null,
    sparkline(s.history, Date.now()));
}

// Which GPUs an app holds, with their utilisation and VRAM; null when it holds none. Where the
// host reports what the app itself uses (NVIDIA, `usage`), that is shown instead of the GPU's
// figures: "0 % · 0 MiB" for an app that holds a GPU but runs nothing on it.
function appGpuUsage(a) {
  const s = state.gpuStats && state.gpuStats.get(a.host);
  if (!s) return null;
  const held = s.apps.find(x => x.app === a.name);
  const own = (s.usage || []).filter(u => u.app === a.name);
  const ids = (held ? held.gpus : []).concat(own.map(u => u.gpu).filter(id => !held || !held.gpus.includes(id)));
  if (!ids.length) return null;
  const known = v => v !== undefined && v !== null;
  return el("span", { class: "detail gpu-usage", "data-usage": a.name }, ids.map(id => {
    const u = own.find(x => x.gpu === id);
    if (u) return id + ": " + (known(u.util) ? u.util + " % · " : "") + u.vram_used_mib + " MiB";
    const g = s.gpus.find(x => x.id === id);
    const c = g ? g.current : {};
    const figs = [known(c.util) ? c.util + " %" : null,
      known(c.vram_used_mib) ? c.vram_used_mib + " MiB" : null].filter(Boolean);
    return id + (figs.length ? ": " + figs.join(", ") : "");
  }).join("; "));
}
