// legcrawl serve: polls the JSON endpoints and updates the page in place.
// Data from the crawl is written with textContent and SVG attributes only,
// never as HTML.
"use strict";
(function () {
  var token = new URLSearchParams(location.search).get("token");
  var SVG = "http://www.w3.org/2000/svg";
  var hostSort = { key: "queued", desc: true };
  var hosts = [];

  function api(path) {
    var url = path;
    var headers = token ? { Authorization: "Bearer " + token } : {};
    return fetch(url, { headers: headers, cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error(path + ": HTTP " + r.status);
      return r.json();
    });
  }
  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function fmt(n) { return Number(n || 0).toLocaleString("en-US"); }
  // A count, or "-" where it is not kept (a shared crawl's per-host counts).
  function known(n) { return n === null || n === undefined ? "-" : fmt(n); }
  function bytes(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    n = Number(n || 0);
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + u[i];
  }
  // Unix seconds as RFC 3339 UTC, as the server's first paint writes them.
  function when(secs) {
    if (!secs) return "";
    return new Date(secs * 1000).toISOString().slice(0, 19) + "Z";
  }
  // A count with a unit prefix for an axis: 1500 -> "1.5k".
  function short(n) {
    if (n >= 1e6) return +(n / 1e6).toFixed(1) + "M";
    if (n >= 1e3) return +(n / 1e3).toFixed(1) + "k";
    return String(+n.toFixed(1));
  }
  function text(c, x, y, words, anchor, cls) {
    var t = svg("text", { x: x, y: y, "text-anchor": anchor || "middle", "class": cls || "axis" });
    t.textContent = words;
    c.appendChild(t);
    return t;
  }
  // Axes of a chart's plot area: a y axis with `ticks` [[value, y]], its
  // label, and an x axis line with its label.
  function axes(c, box, ticks, yLabel, xLabel) {
    c.appendChild(svg("line", { x1: box.l, y1: box.t, x2: box.l, y2: box.b, "class": "axis-line" }));
    c.appendChild(svg("line", { x1: box.l, y1: box.b, x2: box.r, y2: box.b, "class": "axis-line" }));
    ticks.forEach(function (t) {
      c.appendChild(svg("line", { x1: box.l, y1: t[1], x2: box.r, y2: t[1], "class": "grid" }));
      text(c, box.l - 6, t[1] + 4, short(t[0]), "end");
    });
    var yl = text(c, 14, (box.t + box.b) / 2, yLabel);
    yl.setAttribute("transform", "rotate(-90 14 " + (box.t + box.b) / 2 + ")");
    text(c, (box.l + box.r) / 2, box.b + 34, xLabel);
  }
  // The pages a run's named outcomes do not count (requests the scope no longer holds, dropped unfetched).
  function outOfScope(p) {
    var named = OUTCOMES.reduce(function (sum, o) { return sum + (p[o] || 0); }, 0);
    return Math.max(0, (p.pages || 0) - named);
  }
  function row(cells) {
    var tr = el("tr");
    cells.forEach(function (c) { tr.appendChild(el("td", c)); });
    return tr;
  }

  function phase(d) {
    var p = $("phase");
    p.textContent = d.message;
    p.setAttribute("data-phase", d.phase);
  }

  function overview(d) {
    phase(d);
    if (!d.pages) return;
    $("c-pages").textContent = fmt(d.pages.pages);
    $("c-rate").textContent = d.phase === "running" ? String(d.pages_per_s) : "–";
    $("c-queued").textContent = fmt(d.queued);
    $("c-in_flight").textContent = fmt(d.in_flight);
    $("c-items").textContent = fmt(d.items_stored);
    $("c-bytes").textContent = bytes(d.bytes);
    $("c-errors").textContent = fmt(d.errors_total);
    OUTCOMES.forEach(function (k) { $("o-" + k).textContent = fmt(d.pages[k]); });
    $("o-out_of_scope").textContent = fmt(outOfScope(d.pages));
    var kinds = $("error-kinds").tBodies[0];
    clear(kinds);
    Object.keys(d.errors).forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("th", k));
      tr.appendChild(el("td", fmt(d.errors[k])));
      kinds.appendChild(tr);
    });
    rateChart(d.rate);
  }

  function rateChart(points) {
    var c = $("rate-chart");
    clear(c);
    var box = { l: 60, r: 790, t: 10, b: 180 };
    if (!points.length) {
      $("rate-note").textContent = "no samples yet";
      return;
    }
    var t0 = points[0][0], t1 = points[points.length - 1][0];
    var max = Math.max.apply(null, points.map(function (p) { return p[1]; }).concat([1]));
    var ys = function (v) { return box.b - v / max * (box.b - box.t); };
    var xy = points.map(function (p) {
      var x = t1 > t0 ? box.l + (p[0] - t0) / (t1 - t0) * (box.r - box.l) : (box.l + box.r) / 2;
      return x.toFixed(1) + "," + ys(p[1]).toFixed(1);
    });
    axes(c, box, [[0, box.b], [max / 2, ys(max / 2)], [max, ys(max)]], "pages/s", "time (UTC)");
    text(c, box.l, box.b + 16, when(Math.round(t0 / 1000)).slice(11, 19), "start");
    text(c, box.r, box.b + 16, when(Math.round(t1 / 1000)).slice(11, 19), "end");
    c.appendChild(svg("polyline", { points: box.l + "," + box.b + " " + xy.join(" ") + " " + box.r + "," + box.b, "class": "area" }));
    c.appendChild(svg("polyline", { points: xy.join(" "), "class": "line" }));
    var secs = Math.round((t1 - t0) / 1000);
    $("rate-note").textContent = "peak " + max + " pages/s · last " +
      (secs >= 120 ? Math.round(secs / 60) + " min" : secs + " s") + " of the run";
  }

  function renderHosts() {
    var body = $("hosts-table").tBodies[0];
    clear(body);
    var k = hostSort.key, dir = hostSort.desc ? -1 : 1;
    var sorted = hosts.slice().sort(function (a, b) {
      var x = a[k], y = b[k];
      return (x < y ? -1 : x > y ? 1 : 0) * dir;
    });
    sorted.forEach(function (h) {
      body.appendChild(row([h.host, fmt(h.queued) + (h.more ? "+" : ""), fmt(h.in_flight), known(h.fetched),
        known(h.errors), fmt(h.delay_ms) + " ms", fmt(h.wait_ms) + " ms", h.robots, h.parked ? "parked" : ""]));
    });
    document.querySelectorAll("#hosts-table th").forEach(function (th) {
      th.className = th.getAttribute("data-key") === k ? (hostSort.desc ? "sorted desc" : "sorted asc") : "";
    });
  }
  function hostsData(d) {
    hosts = d.hosts;
    $("hosts-note").textContent = d.hosts.length < d.hosts_total
      ? "(the " + d.hosts.length + " busiest of " + fmt(d.hosts_total) + ")"
      : "(" + fmt(d.hosts_total) + ")";
    renderHosts();
    var top = $("top-hosts").tBodies[0];
    clear(top);
    hosts.slice(0, 5).forEach(function (h) {
      top.appendChild(row([h.host, fmt(h.queued) + (h.more ? "+" : ""), fmt(h.in_flight), known(h.fetched), known(h.errors)]));
    });
  }

  var OUTCOMES = ["new", "changed", "unchanged", "gone", "failed", "blocked"];
  // Runs as groups of bars, one per outcome, on a log scale: 5 changed pages
  // beside 520 unchanged stay visible. Each bar says its number.
  function runs(d) {
    var body = $("runs-table").tBodies[0];
    clear(body);
    d.runs.slice().reverse().forEach(function (r) {
      var cells = [r.id, when(r.started_at), r.outcome, fmt(r.pages.pages)];
      OUTCOMES.forEach(function (o) { cells.push(fmt(r.pages[o])); });
      body.appendChild(row(cells.concat([fmt(outOfScope(r.pages)), fmt(r.items)])));
    });
    var c = $("runs-chart");
    clear(c);
    var n = d.runs.length;
    if (!n) return;
    var box = { l: 60, r: 790, t: 10, b: 195 };
    var max = Math.max.apply(null, d.runs.map(function (r) { return r.pages.pages; }).concat([1]));
    var top = Math.max(1, Math.ceil(Math.log10(max + 1)));
    // log10(1 + v): 0 at the axis, 1 page above it.
    var ys = function (v) { return box.b - Math.log10(1 + v) / top * (box.b - box.t); };
    var ticks = [];
    for (var k = 0; k <= top; k++) ticks.push([k ? Math.pow(10, k) : 0, ys(k ? Math.pow(10, k) : 0)]);
    axes(c, box, ticks, "pages (log scale)", "run");
    var gw = (box.r - box.l) / n, bw = gw * 0.8 / OUTCOMES.length;
    var every = Math.ceil(n / 20);
    d.runs.forEach(function (r, i) {
      var x0 = box.l + i * gw + gw * 0.1;
      OUTCOMES.forEach(function (o, j) {
        var v = r.pages[o] || 0;
        if (v <= 0) return;
        var y = ys(v);
        var rect = svg("rect", { x: (x0 + j * bw).toFixed(1), y: y.toFixed(1), width: Math.max(bw - 1, 1).toFixed(1),
          height: (box.b - y).toFixed(1), "class": "bar " + o });
        var tip = svg("title", {});
        tip.textContent = "run " + r.id + ": " + fmt(v) + " " + o;
        rect.appendChild(tip);
        c.appendChild(rect);
        if (n <= 8) text(c, (x0 + j * bw + bw / 2).toFixed(1), (y - 3).toFixed(1), short(v), "middle", "count");
      });
      if (i % every === 0) text(c, (x0 + gw * 0.4).toFixed(1), box.b + 16, String(r.id));
    });
    var legend = $("runs-legend");
    if (!legend.firstChild) OUTCOMES.forEach(function (o) { legend.appendChild(el("span", o, "key " + o)); });
  }

  function items(d) {
    var list = $("items-list");
    clear(list);
    if (!d.items.length) list.appendChild(el("p", d.kept ? "no item matches" : "no items yet", "empty"));
    d.items.forEach(function (it) {
      var det = el("details", null, "item");
      var sum = el("summary");
      sum.appendChild(el("span", "#" + it.seq, "seq"));
      sum.appendChild(el("span", it.url || "(no url)", "url"));
      if (it.item && it.item.title) sum.appendChild(el("span", it.item.title, "title"));
      det.appendChild(sum);
      det.appendChild(el("pre", JSON.stringify(it.item, null, 2)));
      list.appendChild(det);
    });
  }

  function frontier(d) {
    var list = $("frontier-list");
    clear(list);
    if (!d.hosts.length) list.appendChild(el("p", "the queue is empty", "empty"));
    d.hosts.forEach(function (h) {
      var box = el("div", null, "head");
      box.appendChild(el("h3", h.host));
      var ol = el("ol");
      h.urls.forEach(function (u) { ol.appendChild(el("li", u, "url")); });
      box.appendChild(ol);
      list.appendChild(box);
    });
  }

  function errors(d) {
    var body = $("errors-table").tBodies[0];
    clear(body);
    d.errors.forEach(function (e) {
      var tr = row([when(e.at), e.url, e.reason]);
      tr.children[1].className = "url";
      body.appendChild(tr);
    });
  }

  var openItems = false;
  function poll() {
    var q = $("item-q").value;
    var jobs = [
      api("api/overview").then(overview),
      api("api/hosts").then(hostsData),
      api("api/runs").then(runs),
      api("api/frontier").then(frontier),
      api("api/errors").then(errors)
    ];
    if (!openItems) jobs.push(api("api/items?q=" + encodeURIComponent(q)).then(items));
    Promise.all(jobs).catch(function (e) {
      var p = $("phase");
      p.textContent = "cannot reach serve: " + e.message;
      p.setAttribute("data-phase", "unreadable");
    }).then(function () { setTimeout(poll, 2000); });
  }

  function tabs() {
    var id = (location.hash || "#overview").slice(1);
    document.querySelectorAll("main > section").forEach(function (s) { s.hidden = s.id !== id; });
    document.querySelectorAll("nav a").forEach(function (a) {
      a.className = a.getAttribute("data-tab") === id ? "active" : "";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (token) document.querySelectorAll("footer a").forEach(function (a) {
      a.setAttribute("href", a.getAttribute("href") + "?token=" + encodeURIComponent(token));
    });
    document.querySelectorAll("#hosts-table th").forEach(function (th) {
      th.addEventListener("click", function () {
        var k = th.getAttribute("data-key");
        hostSort = { key: k, desc: hostSort.key === k ? !hostSort.desc : k !== "host" };
        renderHosts();
      });
    });
    $("item-q").addEventListener("input", function () {
      api("api/items?q=" + encodeURIComponent($("item-q").value)).then(items);
    });
    // An item opened for reading is not replaced under the reader.
    $("items-list").addEventListener("toggle", function () {
      openItems = !!document.querySelector("#items-list details[open]");
    }, true);
    window.addEventListener("hashchange", tabs);
    tabs();
    poll();
  });
})();
