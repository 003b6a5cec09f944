// What explorer.html and series.html share (each page embeds this script before its own):
// number formatting, HTML escaping, and the row of column selectors, one <select class="col">
// per column ("(any)" first, then the column's values), whose choice is an attribute id or -1.
"use strict";

window.sdsPage = (function () {
  const $ = (id) => document.getElementById(id);
  const fmt = (n) => Number(n).toLocaleString("en-US");
  const esc = (t) => String(t).replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

  // One selector per column that has values, into #selectors; `label(a)` is attribute a's
  // value; `pick(c, a)` is called with the chosen attribute id (-1: "(any)"); #clear calls
  // `clear()`.
  function selectors(columns, attrsOf, label, pick, clear) {
    const host = $("selectors");
    columns.forEach((name, c) => {
      if (!attrsOf[c].length) return;
      const wrap = document.createElement("label");
      wrap.className = "selector";
      const sel = document.createElement("select");
      sel.className = "col"; sel.dataset.index = c; sel.dataset.column = name;
      sel.add(new Option("(any)", ""));
      for (const a of attrsOf[c]) {
        const o = new Option(label(a), label(a));
        o.dataset.attr = a;
        sel.add(o);
      }
      sel.addEventListener("change", () => {
        const o = sel.selectedOptions[0];
        pick(c, o && o.value !== "" ? +o.dataset.attr : -1);
      });
      wrap.append(document.createTextNode(name), sel);
      host.appendChild(wrap);
    });
    $("clear").addEventListener("click", clear);
  }

  // Show the selection `sel` (per column: an attribute id or -1) in the selectors; with
  // `full`, the columns left at "(any)" are disabled (the selection has the longest length).
  function show(sel, label, full) {
    document.querySelectorAll("select.col").forEach((el) => {
      const a = sel[+el.dataset.index];
      el.value = a >= 0 ? label(a) : "";
      el.disabled = full && a < 0;
    });
  }

  return { $, fmt, esc, selectors, show };
})();
