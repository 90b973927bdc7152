// odac-sim dashboard, logs panel: the Logs button of an app opens a panel that reads
// GET /api/apps/{name}/logs (SSE, read with fetch so the API token is sent) and shows the last
// 200 lines and, with Follow, new output as it comes (at most 2000 lines kept). Dropped lines
// show as "[N lines dropped]"; the stream's end shows why it ended. Close (or opening another
// app's logs) aborts the request, which makes the control plane cancel the agent's stream.
// Uses `token` and `parseBlock` from dashboard.js.
"use strict";

const MAX_LOG_LINES = 2000;
const logsPanel = { controller: null, lines: [] };

function logsEndText(p) {
  const why = {
    complete: "end of output",
    cancelled: "stream cancelled",
    timeout: "stream timed out",
    shutdown: "the agent is shutting down",
    not_found: "no container",
    busy: "too many log streams on this host",
    agent_disconnected: "the agent disconnected",
    error: "the engine failed",
  }[p.reason] || p.reason;
  return "ended: " + why + (p.message ? " — " + p.message : "");
}

function appendLogs(lines) {
  const out = document.getElementById("logs-output");
  const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
  logsPanel.lines.push(...lines);
  if (logsPanel.lines.length > MAX_LOG_LINES) {
    logsPanel.lines.splice(0, logsPanel.lines.length - MAX_LOG_LINES);
  }
  out.textContent = logsPanel.lines.join("\n");
  if (atBottom) out.scrollTop = out.scrollHeight;
}

function closeLogs() {
  if (logsPanel.controller) logsPanel.controller.abort();
  logsPanel.controller = null;
  document.getElementById("logs-panel").hidden = true;
}

async function openLogs(name) {
  if (logsPanel.controller) logsPanel.controller.abort();
  const ctrl = new AbortController();
  logsPanel.controller = ctrl;
  logsPanel.lines = [];
  const panel = document.getElementById("logs-panel");
  panel.hidden = false;
  document.getElementById("logs-app").textContent = name;
  document.getElementById("logs-output").textContent = "";
  const status = document.getElementById("logs-status");
  const setStatus = (text, isError) => {
    if (logsPanel.controller !== ctrl) return;
    status.textContent = text;
    status.className = isError ? "error" : "muted";
  };
  setStatus("connecting…");
  const follow = document.getElementById("logs-follow").checked;
  const headers = { "Accept": "text/event-stream" };
  if (token) headers["Authorization"] = "Bearer " + token;
  try {
    const path = "/api/apps/" + encodeURIComponent(name) + "/logs?tail=200&follow=" + follow;
    const res = await fetch(path, { headers, cache: "no-store", signal: ctrl.signal });
    if (!res.ok || !res.body) {
      const data = await res.json().catch(() => null);
      setStatus("logs: " + ((data && data.error) || ("http " + res.status)), true);
      return;
    }
    setStatus(follow ? "following" : "loading");
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const { kind, payload } = parseBlock(buf.slice(0, end));
        buf = buf.slice(end + 2);
        if (!payload || logsPanel.controller !== ctrl) continue;
        const dropped = payload.dropped ? ["[" + payload.dropped + " lines dropped]"] : [];
        if (kind === "logs") {
          appendLogs(dropped.concat(payload.lines || []));
        } else if (kind === "end") {
          if (dropped.length) appendLogs(dropped);
          const clean = payload.reason === "complete" || payload.reason === "timeout";
          setStatus(logsEndText(payload), !clean);
        }
      }
    }
  } catch (e) {
    if (e.name !== "AbortError") setStatus("logs: " + e.message, true);
  }
}

document.getElementById("logs-close").addEventListener("click", closeLogs);
