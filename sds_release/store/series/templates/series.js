// series.html: choose values for some columns; see that combination's DP count in every period
// with its 95% noise interval, "suppressed" where the period's release did not report it, and the
// changes between consecutive periods that exceed the combined noise interval. Data: the JSON
// block #series (written by sds_release/store/series/page.py). Runs after selectors.js
// (window.sdsPage), which it shares with explorer.html. No network.
"use strict";

(function () {
  const { $, fmt, esc } = window.sdsPage;
  const state = { d: null, sel: [], byKey: new Map() };
  window.series = { ready: false, error: null, selection: null };

  function attrText(a) {
    const d = state.d, [c, v] = d.attrs[a];
    return d.columns[c] + ":" + v;
  }

  function comboText(i) {
    return state.d.combos[i].length ? state.d.names[i] : "all records";
  }

  // the 95% half-width of period p's count of a combination of length k (null: not described)
  function halfWidth(p, k) {
    const P = state.d.periods[p];
    if (k === 0) return P.record_count_hw;
    const h = P.half_width_by_len[String(k)];
    return h === undefined ? null : h;
  }

  // one point per period: {p, count (>= 0), hw} or {p, suppressed} or {p, absent}
  function points(i) {
    const d = state.d, k = d.combos[i].length;
    return d.counts[i].map((c, p) => c === d.suppressed ? { p, suppressed: true }
      : c === d.not_released ? { p, absent: true } : { p, count: c, hw: halfWidth(p, k) });
  }

  // the change from the period before (both reported): {change, combined, beyond}
  function change(pts, p) {
    const a = pts[p - 1], b = pts[p];
    if (!a || a.count === undefined || b.count === undefined) return null;
    const combined = a.hw == null || b.hw == null ? null : Math.sqrt(a.hw * a.hw + b.hw * b.hw);
    const diff = b.count - a.count;
    return { change: diff, combined, beyond: combined != null && Math.abs(diff) > combined };
  }

  function chart(i) {
    const d = state.d, pts = points(i), P = pts.length;
    const W = 640, H = 260, L = 56, R = 48, T = 14, B = 44;
    let top = 1, low = 0;
    for (const q of pts) if (q.count !== undefined) {
      top = Math.max(top, q.count + (q.hw || 0));
      low = Math.min(low, q.count - (q.hw || 0));
    }
    top *= 1.08;
    const x = (p) => L + (P === 1 ? (W - L - R) / 2 : p * (W - L - R) / (P - 1));
    const y = (v) => T + (top - v) / (top - low) * (H - T - B);
    let s = `<svg viewBox="0 0 ${W} ${H}" class="series-svg" role="img" aria-label="DP count per ${d.by_period ? "period" : "release"}">`;
    s += `<line class="axis" x1="${L}" x2="${W - R}" y1="${y(0)}" y2="${y(0)}"/>`;
    for (const v of [0, top / 1.08 / 2, top / 1.08]) {
      s += `<text class="tick" x="${L - 6}" y="${y(v) + 3}" text-anchor="end">${fmt(Math.round(v))}</text>`;
    }
    for (let p = 1; p < P; p++) {
      const c = change(pts, p);
      if (!c) continue;
      const cls = c.beyond ? "mark change" : "link";
      s += `<line class="${cls}" data-period="${esc(d.periods[p].period)}" x1="${x(p - 1)}" x2="${x(p)}" ` +
        `y1="${y(pts[p - 1].count)}" y2="${y(pts[p].count)}"><title>${fmt(c.change)}` +
        (c.combined != null ? ` (combined 95% noise ±${c.combined.toFixed(1)})` : "") + `</title></line>`;
    }
    for (const q of pts) {
      const label = esc(d.periods[q.p].period);
      s += `<text class="tick" x="${x(q.p)}" y="${H - B + 16}" text-anchor="middle">${label}</text>`;
      if (q.suppressed) {
        s += `<g class="mark suppressed" data-period="${label}"><rect x="${x(q.p) - 5}" y="${y(0) - 5}" width="10" height="10"/>` +
          `<text x="${x(q.p)}" y="${y(0) - 9}" text-anchor="middle">suppressed</text>` +
          `<title>${label}: suppressed (not reported by release ${esc(d.periods[q.p].release_id)})</title></g>`;
      } else if (q.absent) {
        s += `<text class="mark absent" data-period="${label}" x="${x(q.p)}" y="${y(0) - 9}" text-anchor="middle">not released</text>`;
      } else {
        if (q.hw != null && q.hw > 0) {
          s += `<line class="mark bar" data-period="${label}" data-low="${(q.count - q.hw).toFixed(2)}" ` +
            `data-high="${(q.count + q.hw).toFixed(2)}" x1="${x(q.p)}" x2="${x(q.p)}" ` +
            `y1="${y(q.count - q.hw)}" y2="${y(q.count + q.hw)}"/>`;
        }
        s += `<circle class="mark point" data-period="${label}" data-count="${q.count}" cx="${x(q.p)}" ` +
          `cy="${y(q.count)}" r="4.5"><title>${label}: ${fmt(q.count)}` +
          (q.hw != null ? ` ± ${q.hw.toFixed(1)}` : "") + `</title></circle>`;
      }
    }
    return s + "</svg>";
  }

  function table(i) {
    const d = state.d, pts = points(i), tb = $("point-rows");
    tb.innerHTML = "";
    for (const q of pts) {
      const P = d.periods[q.p], c = change(pts, q.p), tr = document.createElement("tr");
      tr.dataset.period = P.period;
      const count = q.suppressed ? "suppressed" : q.absent ? "not released" : fmt(q.count);
      tr.innerHTML = `<td>${esc(P.period)}</td><td>${esc(P.release_id)}</td>` +
        `<td class="num">${P.epsilon.toPrecision(3)}</td><td class="num count">${count}</td>` +
        `<td class="num">${q.hw != null && q.count !== undefined ? "±" + q.hw.toFixed(1) : ""}</td>` +
        `<td class="num">${c ? (c.change > 0 ? "+" : "") + fmt(c.change) : ""}</td>` +
        `<td class="beyond">${c && c.beyond ? "yes" : c ? "no" : ""}</td>`;
      tb.appendChild(tr);
    }
  }

  function selectedIds() {
    return state.sel.filter((a) => a >= 0).sort((x, y) => x - y);
  }

  function render() {
    const ids = selectedIds(), i = state.byKey.get(ids.join(","));
    const maxLen = Math.max(...state.d.periods.map((P) => P.reporting_length));
    sdsPage.show(state.sel, attrLabel, ids.length >= maxLen);
    window.series.selection = ids.map(attrText);
    if (i === undefined) {
      $("combination").textContent = ids.map(attrText).sort().join(";");
      $("chart").innerHTML = "<p class='none'>No release of the series reports this combination " +
        "(suppressed in every period, or never a candidate).</p>";
      $("point-rows").innerHTML = "";
      return;
    }
    $("combination").textContent = comboText(i);
    $("chart").innerHTML = chart(i);
    table(i);
  }

  function attrLabel(a) {
    return state.d.attrs[a][1];
  }

  function select(ids) {
    state.sel = state.sel.map(() => -1);
    for (const a of ids) state.sel[state.d.attrs[a][0]] = a;
    render();
  }

  function changesTable() {
    const d = state.d, tb = $("change-rows");
    for (const [i, p, diff, combined] of d.changes) {
      const tr = document.createElement("tr"), pts = points(i);
      tr.innerHTML = `<td>${esc(comboText(i))}</td><td>${esc(d.periods[p - 1].period)}</td>` +
        `<td>${esc(d.periods[p].period)}</td><td class="num">${fmt(pts[p - 1].count)} → ${fmt(pts[p].count)}</td>` +
        `<td class="num">${diff > 0 ? "+" : ""}${fmt(diff)}</td><td class="num">±${combined.toFixed(1)}</td>`;
      tr.addEventListener("click", () => select(state.d.combos[i]));
      tb.appendChild(tr);
    }
    $("changes-caption").textContent = `${fmt(d.changes_beyond_noise)} of ${fmt(d.changes_compared)} ` +
      "changes between consecutive counts exceed their combined 95% noise interval" +
      (d.changes.length < d.changes_beyond_noise ? `; the ${d.changes.length} largest:` : ":");
  }

  function build() {
    const d = state.d;
    state.sel = d.columns.map(() => -1);
    d.combos.forEach((ids, i) => state.byKey.set(ids.join(","), i));
    const byCol = d.columns.map(() => []);
    d.attrs.forEach(([c], a) => byCol[c].push(a));
    sdsPage.selectors(d.columns, byCol, attrLabel, (c, a) => { state.sel[c] = a; render(); },
      () => select([]));
  }

  try {
    state.d = JSON.parse($("series").textContent);
    build();
    changesTable();
    render();
    $("status").textContent = `${fmt(state.d.combos.length)} combinations over ` +
      `${state.d.periods.length} ${state.d.by_period ? "periods" : "releases"}`;
    window.series.ready = true;
    document.body.dataset.ready = "1";
  } catch (e) {
    window.series.error = String(e);
    $("status").textContent = "Could not load the data: " + e;
    $("status").className = "error";
    throw e;
  }
})();
