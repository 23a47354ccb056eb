// wantofight gallery: filters, paging and flags over window.WTF_DATA (data/clips.js).
// Works from file:// (flags live in localStorage; "download exclude.json" exports them) and from
// `wtf browse --serve` (flags are read from and written to the server's exclude file).
"use strict";
const WTF = (() => {
  const PAGE = 48;
  const data = window.WTF_DATA || { columns: [], rows: [], dataset: "" };
  const col = Object.fromEntries(data.columns.map((name, i) => [name, i]));
  const field = (row, name) => row[col[name]];
  const storeKey = "wtf-flags:" + data.dataset;
  let served = false;
  let flags = {};

  // ---- flags: clip_id -> reason ---------------------------------------------------------------
  function loadLocal() {
    try { flags = JSON.parse(localStorage.getItem(storeKey) || "{}"); } catch (e) { flags = {}; }
  }
  function saveLocal() {
    try { localStorage.setItem(storeKey, JSON.stringify(flags)); } catch (e) { /* file:// without storage */ }
  }
  function excludeDocument() {
    return { version: 1, clips: Object.keys(flags).sort().map((id) => ({ clip_id: id, reason: flags[id] })) };
  }
  async function connect() {
    // Served by `wtf browse --serve`: the server's exclude file is the truth.
    if (!location.protocol.startsWith("http")) { loadLocal(); return; }
    try {
      const response = await fetch("api/flags");
      if (!response.ok) throw new Error(response.status);
      const doc = await response.json();
      flags = Object.fromEntries(doc.clips.map((c) => [c.clip_id, c.reason || ""]));
      served = true;
    } catch (e) { loadLocal(); }
  }
  async function saveFlags() {
    saveLocal();
    if (!served) return "saved in this browser; download exclude.json to use it";
    const response = await fetch("api/flags", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(excludeDocument()),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || response.status);
    return "written to " + answer.file;
  }
  function download() {
    const blob = new Blob([JSON.stringify(excludeDocument(), null, 2) + "\n"], { type: "application/json" });
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = "exclude.json";
    document.body.appendChild(a);
    a.click();
    a.remove();
  }
  function showMode() {
    const mode = document.getElementById("mode");
    if (mode) mode.textContent = served ? "served: flags go to the server's exclude file" : "from disk: flags stay in this browser until downloaded";
  }
  const hasMedia = (row) => field(row, "media") || served;

  // ---- the grid ---------------------------------------------------------------------------------
  const FILTERS = ["tier", "split", "move", "event", "episode", "policy"];
  function state() {
    const params = new URLSearchParams(location.hash.slice(1));
    return { params, page: Math.max(0, parseInt(params.get("page") || "0", 10) || 0) };
  }
  function setState(params) { location.hash = params.toString(); }

  function fillSelect(select, values, chosen) {
    select.innerHTML = "";
    const all = document.createElement("option");
    all.value = ""; all.textContent = "all";
    select.appendChild(all);
    for (const value of values) {
      const o = document.createElement("option");
      o.value = value; o.textContent = value;
      select.appendChild(o);
    }
    select.value = chosen || "";
  }
  function distinct(name) {
    const seen = new Set();
    for (const row of data.rows) {
      const v = field(row, name);
      for (const x of Array.isArray(v) ? v : [v]) if (x !== null && x !== undefined) seen.add(String(x));
    }
    return [...seen].sort();
  }
  function matches(row, params, flaggedOnly) {
    for (const name of FILTERS) {
      const want = params.get(name);
      if (!want) continue;
      const key = document.getElementById("f-" + name).dataset.field;
      const v = field(row, key);
      if (Array.isArray(v) ? !v.map(String).includes(want) : String(v) !== want) return false;
    }
    return !flaggedOnly || field(row, "id") in flags;
  }
  function card(row) {
    const id = field(row, "id");
    const a = document.createElement("a");
    a.className = "card" + (id in flags ? " flagged" : "");
    a.href = "clip.html#" + id;
    a.dataset.clip = id;
    a.dataset.tier = field(row, "tier");
    if (hasMedia(row)) {
      const v = document.createElement("video");
      v.muted = true; v.loop = true; v.preload = "none"; v.playsInline = true;
      v.poster = "media/" + id + ".png";
      v.src = "media/" + id + ".mp4";
      a.addEventListener("mouseenter", () => { v.play().catch(() => {}); });
      a.addEventListener("mouseleave", () => { v.pause(); v.currentTime = 0; });
      a.appendChild(v);
    } else {
      const p = document.createElement("div");
      p.className = "placeholder";
      p.textContent = "no preview (raise --limit or use --serve)";
      a.appendChild(p);
    }
    const cap = document.createElement("div");
    cap.className = "cap";
    const moves = field(row, "moves").join(" + ") || "-";
    cap.innerHTML = "<b></b> · <span class=mv></span> · <span class=fr></span><div class=ev></div>";
    cap.querySelector("b").textContent = field(row, "tier");
    cap.querySelector(".mv").textContent = moves + (field(row, "side") ? " (" + field(row, "side") + ")" : "");
    cap.querySelector(".fr").textContent = field(row, "frames") + " f · " + field(row, "split");
    cap.querySelector(".ev").textContent = field(row, "events").filter((e) => e !== "idle").join(", ") || " ";
    a.appendChild(cap);
    if (id in flags) {
      const m = document.createElement("span");
      m.className = "flag-mark"; m.textContent = "flagged"; m.title = flags[id];
      a.appendChild(m);
    }
    return a;
  }
  function renderGrid() {
    const { params, page } = state();
    const flaggedOnly = params.get("flagged") === "1";
    for (const name of FILTERS) document.getElementById("f-" + name).value = params.get(name) || "";
    document.getElementById("f-flagged").checked = flaggedOnly;
    const rows = data.rows.filter((row) => matches(row, params, flaggedOnly));
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    const current = Math.min(page, pages - 1);
    const grid = document.getElementById("grid");
    grid.innerHTML = "";
    for (const row of rows.slice(current * PAGE, (current + 1) * PAGE)) grid.appendChild(card(row));
    document.getElementById("count").textContent = rows.length + " of " + data.rows.length + " clips";
    document.getElementById("page").textContent = "page " + (current + 1) + " / " + pages;
    document.getElementById("prev").disabled = current === 0;
    document.getElementById("next").disabled = current >= pages - 1;
    document.getElementById("flag-count").textContent = Object.keys(flags).length + " flagged";
    document.body.dataset.ready = "1";
  }
  async function index() {
    await connect();
    showMode();
    document.getElementById("dataset").textContent = data.dataset;
    const { params } = state();
    for (const name of FILTERS) {
      const select = document.getElementById("f-" + name);
      fillSelect(select, distinct(select.dataset.field), params.get(name));
      select.addEventListener("change", () => {
        const p = state().params;
        if (select.value) p.set(name, select.value); else p.delete(name);
        p.delete("page");
        setState(p);
      });
    }
    document.getElementById("f-flagged").addEventListener("change", (e) => {
      const p = state().params;
      if (e.target.checked) p.set("flagged", "1"); else p.delete("flagged");
      p.delete("page");
      setState(p);
    });
    const turn = (delta) => {
      const { params: p, page } = state();
      p.set("page", String(Math.max(0, page + delta)));
      setState(p);
    };
    document.getElementById("prev").addEventListener("click", () => turn(-1));
    document.getElementById("next").addEventListener("click", () => turn(1));
    document.getElementById("export").addEventListener("click", download);
    window.addEventListener("hashchange", renderGrid);
    renderGrid();
  }

  // ---- one clip ---------------------------------------------------------------------------------
  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement("script");
      s.src = src; s.onload = resolve; s.onerror = () => reject(new Error("cannot load " + src));
      document.head.appendChild(s);
    });
  }
  function table(el, header, rows) {
    el.innerHTML = "";
    if (header) {
      const tr = el.insertRow();
      for (const h of header) { const th = document.createElement("th"); th.textContent = h; tr.appendChild(th); }
    }
    for (const r of rows) {
      const tr = el.insertRow();
      for (const v of r) tr.insertCell().textContent = v === null || v === undefined ? "" : String(v);
    }
  }
  function runs(values) {
    // [[first frame, last frame, value], ...] of equal consecutive values
    const out = [];
    values.forEach((v, i) => {
      if (out.length && out[out.length - 1][2] === v) out[out.length - 1][1] = i;
      else out.push([i, i, v]);
    });
    return out;
  }
  // The clip page's player: controls under the picture (the bottom of the picture is the HUD's event
  // timeline), frame by frame, frames counted from 0 like the HUD's "FRAME t OF N".
  function player(video, frames, fps) {
    const play = document.getElementById("play");
    const seek = document.getElementById("seek");
    const readout = document.getElementById("frame");
    seek.max = String(Math.max(0, frames - 1));
    const current = () => Math.min(frames - 1, Math.max(0, Math.floor(video.currentTime * fps() + 1e-3)));
    const show = () => {
      const f = current();
      readout.dataset.frame = String(f);
      readout.textContent = "frame " + f + " of " + frames;
      seek.value = String(f);
      play.textContent = video.paused ? "play" : "pause";
    };
    const go = (f) => {
      video.pause();
      video.currentTime = (Math.min(frames - 1, Math.max(0, f)) + 0.5) / fps();  // the middle of the frame
    };
    play.addEventListener("click", () => { if (video.paused) video.play().catch(() => {}); else video.pause(); });
    document.getElementById("step-prev").addEventListener("click", () => go(current() - 1));
    document.getElementById("step-next").addEventListener("click", () => go(current() + 1));
    seek.addEventListener("input", () => go(parseInt(seek.value, 10)));
    for (const name of ["timeupdate", "seeked", "play", "pause", "loadeddata"]) video.addEventListener(name, show);
    if (video.requestVideoFrameCallback) {
      const tick = () => { show(); video.requestVideoFrameCallback(tick); };
      video.requestVideoFrameCallback(tick);
    }
    document.addEventListener("keydown", (e) => {
      if (e.target.tagName === "INPUT" && e.target.type !== "range") return;
      if (e.key === " ") { e.preventDefault(); play.click(); }
      else if (e.key === "ArrowLeft") { e.preventDefault(); go(current() - 1); }
      else if (e.key === "ArrowRight") { e.preventDefault(); go(current() + 1); }
    });
    show();
  }
  async function clip() {
    await connect();
    showMode();
    const id = location.hash.slice(1);
    document.getElementById("title").textContent = "clip " + id;
    const row = data.rows.find((r) => field(r, "id") === id);
    const video = document.getElementById("video");
    if (row && hasMedia(row)) {
      video.poster = "media/" + id + ".png";
      video.src = "media/" + id + ".mp4";
      player(video, field(row, "frames"), () => (window.WTF_CLIP ? window.WTF_CLIP.meta.fps : 30));
    } else {
      video.hidden = true;
      document.getElementById("controls").hidden = true;
      document.getElementById("missing").hidden = false;
    }
    const reason = document.getElementById("reason");
    const button = document.getElementById("flag");
    const note = document.getElementById("flag-state");
    const refresh = () => {
      const flagged = id in flags;
      button.textContent = flagged ? "unflag" : "flag";
      if (flagged) reason.value = flags[id];
      document.body.dataset.flagged = flagged ? "1" : "0";
    };
    refresh();
    button.addEventListener("click", async () => {
      if (id in flags) delete flags[id]; else flags[id] = reason.value.trim();
      try { note.textContent = await saveFlags(); } catch (e) { note.textContent = "not saved: " + e.message; }
      refresh();
      document.body.dataset.saved = String(Date.now());
    });
    try {
      if (row && hasMedia(row)) await loadScript("data/clip/" + id + ".js");
    } catch (e) { /* the video may still exist; the tables stay empty */ }
    const detail = window.WTF_CLIP;
    if (detail) {
      table(document.getElementById("meta"), null, Object.entries(detail.meta).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : v]));
      const start = detail.meta.start_frame || 0;
      table(document.getElementById("events"), ["event", "frames (clip)", "attacker", "victim", "move", "detail"],
        detail.events.map((e) => [e.event, (e.start_frame - start) + "–" + (e.end_frame - start - 1), e.attacker, e.victim, e.move, e.detail]));
      const labelRows = [];
      for (const p of ["p1", "p2"]) {
        for (const [a, b, v] of runs(detail.frames[p + "_action"] || [])) labelRows.push([p, a + "–" + b, v]);
      }
      table(document.getElementById("labels"), ["player", "frames", "action"], labelRows);
    }
    document.body.dataset.ready = "1";
  }

  return { index, clip, excludeDocument };
})();
