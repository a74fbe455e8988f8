"use strict";
(() => {
  const live = document.getElementById("live");
  const conn = document.getElementById("conn");
  if (!live || !window.EventSource) return;
  // Logs the reader opened or closed stay so across updates.
  const chosen = new Map();
  live.addEventListener("click", (e) => {
    const s = e.target.closest("details.log > summary");
    if (s) chosen.set(s.parentElement.getAttribute("data-log"), !s.parentElement.open);
  });
  const words = (ms) => {
    if (ms < 1000) return Math.floor(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    const pad = (n) => String(Math.floor(n)).padStart(2, "0");
    if (ms < 3600000) return Math.floor(ms / 60000) + "m" + pad((ms / 1000) % 60) + "s";
    return Math.floor(ms / 3600000) + "h" + pad((ms / 60000) % 60) + "m";
  };
  let since = performance.now();
  setInterval(() => {
    const gone = performance.now() - since;
    for (const el of live.querySelectorAll("[data-running-ms]")) {
      el.textContent = words(Number(el.getAttribute("data-running-ms")) + gone);
    }
  }, 1000);
  const show = (state, text) => { conn.className = state; conn.textContent = text; };
  // A gate's buttons: the answer goes to the page's own origin with the
  // CSRF token it was served with; the note typed survives the updates.
  const csrf = document.querySelector('meta[name="stepseq-csrf"]')?.content;
  const said = document.getElementById("answer-said");
  let note = "";
  live.addEventListener("input", (e) => { if (e.target.matches("[data-note]")) note = e.target.value; });
  live.addEventListener("click", async (e) => {
    const b = e.target.closest("button[data-answer]");
    if (!b || !csrf) return;
    b.disabled = true;
    try {
      const r = await fetch("answer", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Stepseq-Csrf": csrf },
        body: JSON.stringify({ step: b.closest("[data-gate]").getAttribute("data-gate"), approve: b.getAttribute("data-answer") === "approve", note }),
      });
      const v = await r.json();
      said.textContent = v.message || v.code + ": " + v.error;
      said.className = r.ok ? "ok" : "refused";
      if (r.ok) note = "";
    } catch (err) {
      said.textContent = "not sent: " + err;
      said.className = "refused";
    } finally {
      b.disabled = false;
    }
  });
  const es = new EventSource("events");
  es.addEventListener("open", () => show("live", "live"));
  es.addEventListener("error", () => show("down", es.readyState === EventSource.CLOSED ? "offline: reload to update" : "reconnecting…"));
  es.addEventListener("view", (e) => {
    const v = JSON.parse(e.data);
    live.innerHTML = v.html;
    const n = live.querySelector("[data-note]");
    if (n) n.value = note;
    document.title = v.title;
    since = performance.now();
    for (const d of live.querySelectorAll("details.log")) {
      const want = chosen.get(d.getAttribute("data-log"));
      if (want !== undefined) d.open = want;
      const pre = d.querySelector("pre");
      if (pre) pre.scrollTop = pre.scrollHeight;
    }
    show("live", "live");
  });
  for (const pre of live.querySelectorAll("details.log pre")) pre.scrollTop = pre.scrollHeight;
})();
