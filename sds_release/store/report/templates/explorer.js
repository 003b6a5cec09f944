// explorer.html: choose values for up to R columns; see the DP aggregate count of that
// combination (or "suppressed"), the synthetic records' count and the noise's error bar, and
// the largest combinations extending the selection. Data: the gzip+base64 block #data, laid out
// as described by the JSON block #meta (written by sds_release/store/report/explorer.py). Runs
// after selectors.js (window.sdsPage), which it shares with series.html. No network.
"use strict";

(function () {
  const { $, fmt, esc } = window.sdsPage;
  const state = { meta: null, lengths: [], sel: [], ready: false };
  window.explorer = { ready: false, loadMs: null, lastFilterMs: null, error: null };

  async function inflate(b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot decompress the embedded data (no DecompressionStream); " +
        "open explorer.html in a current Chromium, Firefox or Safari");
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return await new Response(stream).arrayBuffer();
  }

  function views(meta, buf) {
    const Attr = meta.attr_bytes === 2 ? Uint16Array : Uint32Array;
    return meta.lengths.map((e) => ({
      k: e.k, n: e.n, hw: e.hw, threshold: e.threshold,
      dp: new Int32Array(buf, e.dp_offset, e.n),
      syn: new Int32Array(buf, e.syn_offset, e.n),
      attrs: e.attr_offsets.map((off) => new Attr(buf, off, e.n)),
    }));
  }

  // Row index of the combination `ids` (ascending attribute ids) at its length, or -1.
  function find(ids) {
    const L = state.lengths[ids.length - 1];
    if (!L) return -1;
    let lo = 0, hi = L.n;
    while (lo < hi) {  // lexicographic lower bound
      const mid = (lo + hi) >>> 1;
      let c = 0;
      for (let j = 0; j < ids.length && c === 0; j++) c = L.attrs[j][mid] - ids[j];
      if (c < 0) lo = mid + 1; else hi = mid;
    }
    if (lo >= L.n) return -1;
    for (let j = 0; j < ids.length; j++) if (L.attrs[j][lo] !== ids[j]) return -1;
    return lo;
  }

  // Rows of length |ids|+1 that contain every id of `ids`, and the one extra id of each.
  function extensions(ids) {
    const L = state.lengths[ids.length];
    const rows = [], extra = [];
    if (!L) return { L, rows, extra };
    const k = L.k, A = L.attrs;
    outer: for (let i = 0; i < L.n; i++) {
      let s = 0, other = -1;
      for (let j = 0; j < k; j++) {
        const a = A[j][i];
        if (s < ids.length && a === ids[s]) s++;
        else if (other === -1) other = a;
        else continue outer;
      }
      if (s === ids.length) { rows.push(i); extra.push(other); }
    }
    return { L, rows, extra };
  }

  function attrText(a) {
    const m = state.meta;
    return m.columns[m.attr_column[a]] + ":" + m.attr_label[a];
  }

  function selectedIds() {
    return state.sel.filter((a) => a >= 0).sort((x, y) => x - y);
  }

  function errorBar(dp, hw, syn) {
    const top = Math.max(dp >= 0 ? dp + hw : 0, syn, 1) * 1.1;
    const W = 520, x = (v) => 20 + (Math.max(v, 0) / top) * (W - 40);
    let s = `<svg viewBox="0 0 ${W} 60" class="bar-svg" role="img" aria-label="error bar">` +
      `<circle cx="24" cy="6" r="4" class="dp"/><text x="32" y="9">DP aggregate, 95% noise interval</text>` +
      `<rect x="236" y="2" width="8" height="8" class="syn"/><text x="250" y="9">synthetic records</text>` +
      `<line x1="20" x2="${W - 20}" y1="44" y2="44" class="axis"/>` +
      `<text x="20" y="57" class="tick">0</text>` +
      `<text x="${W - 20}" y="57" class="tick" text-anchor="end">${fmt(Math.round(top))}</text>`;
    if (dp >= 0) {
      s += `<line class="mark ci" x1="${x(dp - hw)}" x2="${x(dp + hw)}" y1="22" y2="22"/>` +
        `<circle class="mark dp" cx="${x(dp)}" cy="22" r="5"><title>DP aggregate ${fmt(dp)}</title></circle>`;
    }
    s += `<rect class="mark syn" x="${x(syn) - 5}" y="30" width="10" height="10">` +
      `<title>synthetic ${fmt(syn)}</title></rect></svg>`;
    return s;
  }

  function render() {
    const t0 = performance.now();
    const m = state.meta, ids = selectedIds(), k = ids.length;
    // the selected combination
    let dp, syn, hw = 0, label;
    if (k === 0) {
      dp = m.record_count; syn = m.synthetic_records; label = "all records";
      hw = m.record_count_hw || 0;
    } else {
      const L = state.lengths[k - 1], i = find(ids);
      dp = i >= 0 ? L.dp[i] : -1; syn = i >= 0 ? L.syn[i] : 0; hw = L.hw || 0;
      label = ids.map(attrText).join("; ");
    }
    $("combination").textContent = label;
    $("dp-count").textContent = dp >= 0 ? fmt(dp) : "suppressed";
    $("dp-interval").textContent = dp >= 0 && hw > 0
      ? `95% noise interval ${fmt(Math.max(0, Math.round(dp - hw)))} – ${fmt(Math.round(dp + hw))} (±${hw.toFixed(1)})`
      : (dp >= 0 ? "" : (k > 0 ? `not reported: below the threshold of length ${k}` +
        (state.lengths[k - 1].threshold != null ? ` (${state.lengths[k - 1].threshold.toFixed(1)})` : "") +
        " or never a candidate" : ""));
    $("syn-count").textContent = fmt(syn);
    $("bar").innerHTML = errorBar(dp, hw, syn);
    // extensions: dropdown annotations and the table of the largest combinations
    const ext = extensions(ids);
    const byAttr = new Map();
    ext.rows.forEach((r, j) => byAttr.set(ext.extra[j], r));
    updateOptions(ext.L, byAttr, k);
    const order = ext.rows.slice().sort((a, b) =>
      (ext.L.dp[b] - ext.L.dp[a]) || (ext.L.syn[b] - ext.L.syn[a]) || (a - b));
    const top = order.slice(0, m.top_rows);
    const tb = $("top-rows");
    tb.innerHTML = "";
    for (const r of top) {
      const tr = document.createElement("tr");
      const rowIds = ext.L.attrs.map((col) => col[r]);
      const d = ext.L.dp[r], s = ext.L.syn[r];
      tr.innerHTML = `<td>${rowIds.map((a) => esc(attrText(a))).join("; ")}</td>` +
        `<td class="num">${d >= 0 ? fmt(d) : "suppressed"}</td>` +
        `<td class="num">${d >= 0 && ext.L.hw ? "±" + ext.L.hw.toFixed(1) : ""}</td>` +
        `<td class="num">${fmt(s)}</td><td class="num">${d >= 0 ? fmt(s - d) : ""}</td>`;
      tr.addEventListener("click", () => selectIds(rowIds));
      tb.appendChild(tr);
    }
    $("top-caption").textContent = ext.L
      ? `${fmt(ext.rows.length)} combinations of length ${ext.L.k} extend the selection` +
        (ext.rows.length > top.length ? `; the ${top.length} largest by DP count:` : ":")
      : `The selection has the longest published length (${m.reporting_length}).`;
    sdsPage.show(state.sel, attrLabel, k >= m.reporting_length);
    window.explorer.lastFilterMs = performance.now() - t0;
    window.explorer.selection = ids.map(attrText);
  }

  function updateOptions(L, byAttr, k) {
    const m = state.meta;
    document.querySelectorAll("select.col").forEach((el) => {
      const c = +el.dataset.index;
      for (const opt of el.options) {
        if (opt.value === "") continue;
        const a = +opt.dataset.attr;
        const base = m.attr_label[a];
        if (state.sel[c] >= 0 || !L) { opt.textContent = base; continue; }
        const r = byAttr.get(a);
        const d = r === undefined ? -1 : L.dp[r], s = r === undefined ? 0 : L.syn[r];
        opt.textContent = `${base}  (DP ${d >= 0 ? fmt(d) : "suppressed"} · syn ${fmt(s)})`;
      }
    });
  }

  function attrLabel(a) {
    return state.meta.attr_label[a];
  }

  function selectIds(ids) {
    state.sel = state.sel.map(() => -1);
    for (const a of ids) state.sel[state.meta.attr_column[a]] = a;
    render();
  }

  function build() {
    const m = state.meta;
    state.sel = m.columns.map(() => -1);
    const byCol = m.columns.map(() => []);
    m.attr_column.forEach((c, a) => byCol[c].push(a));
    sdsPage.selectors(m.columns, byCol, attrLabel, (c, a) => { state.sel[c] = a; render(); },
      () => selectIds([]));
  }

  async function main() {
    const t0 = performance.now();
    try {
      state.meta = JSON.parse($("meta").textContent);
      const buf = await inflate($("data").textContent.trim());
      state.lengths = views(state.meta, buf);
      build();
      render();
      window.explorer.loadMs = performance.now() - t0;
      window.explorer.ready = true;
      $("status").textContent = `${fmt(state.lengths.reduce((s, L) => s + L.n, 0))} combinations loaded in ${Math.round(window.explorer.loadMs)} ms`;
      document.body.dataset.ready = "1";
    } catch (e) {
      window.explorer.error = String(e);
      $("status").textContent = "Could not load the data: " + e;
      $("status").className = "error";
      throw e;
    }
  }
  main();
})();
