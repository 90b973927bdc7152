// odac-sim dashboard, terminal panel: the Shell button of an app opens an xterm.js terminal
// (vendored from Debian's node-xterm, served by the simulator under /vendor/) on
// GET /api/apps/{name}/exec (a WebSocket; cmd ["/bin/sh"], tty). Binary frames carry the bytes
// (first byte: the stream; 0 is what is typed), text frames `resize` (sent when the terminal
// changes size) and `exit` (shown, with why the session ended). Close ends the session. A
// browser WebSocket cannot send an Authorization header, so the panel needs an open API (the
// simulator on loopback without --api-token).
"use strict";

const termPanel = { ws: null, term: null };

function termStatus(text, isError) {
  const s = document.getElementById("term-status");
  s.textContent = text;
  s.className = isError ? "error" : "muted";
}

function closeTerminal() {
  if (termPanel.ws) termPanel.ws.close();
  termPanel.ws = null;
  document.getElementById("term-panel").hidden = true;
}

function openTerminal(name) {
  if (termPanel.ws) termPanel.ws.close();
  const panel = document.getElementById("term-panel");
  panel.hidden = false;
  document.getElementById("term-app").textContent = name;
  const box = document.getElementById("term-screen");
  box.textContent = "";
  const term = new Terminal({ cols: 100, rows: 24 });
  term.open(box);
  termPanel.term = term;
  const q = "cmd=" + encodeURIComponent(JSON.stringify(["/bin/sh"])) +
    "&tty=true&cols=" + term.cols + "&rows=" + term.rows;
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const ws = new WebSocket(scheme + location.host + "/api/apps/" + encodeURIComponent(name) +
    "/exec?" + q, "odac.exec.v1");
  ws.binaryType = "arraybuffer";
  termPanel.ws = ws;
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  termStatus("connecting…");
  ws.onopen = () => { if (termPanel.ws === ws) termStatus("connected"); term.focus(); };
  ws.onmessage = ev => {
    if (typeof ev.data === "string") {
      let f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.type === "exit") {
        const code = f.code === undefined ? "" : " (exit code " + f.code + ")";
        termStatus("ended: " + f.reason + code + (f.message ? " — " + f.message : ""), f.reason !== "exited");
      }
      return;
    }
    const bytes = new Uint8Array(ev.data);
    if (bytes.length > 0 && (bytes[0] === 1 || bytes[0] === 2)) {
      term.write(decoder.decode(bytes.subarray(1), { stream: true }));
    }
  };
  ws.onclose = () => {
    if (termPanel.ws === ws && !document.getElementById("term-status").textContent.startsWith("ended")) {
      termStatus("closed", true);
    }
  };
  term.on("data", data => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const typed = encoder.encode(data);
    const frame = new Uint8Array(typed.length + 1);
    frame[0] = 0;
    frame.set(typed, 1);
    ws.send(frame);
  });
  term.on("resize", size => {
    if (ws.readyState === WebSocket.OPEN) {
      ws.send(JSON.stringify({ type: "resize", cols: size.cols, rows: size.rows }));
    }
  });
}

document.getElementById("term-close").addEventListener("click", closeTerminal);
