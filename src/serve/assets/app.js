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
  function when(secs) {
    if (!secs) return "";
    return new Date(secs * 1000).toISOString().replace("T", " ").slice(0, 19);
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
    ["new", "changed", "unchanged", "gone", "failed", "blocked"].forEach(function (k) {
      $("o-" + k).textContent = fmt(d.pages[k]);
    });
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
    var W = 800, H = 200, pad = 4;
    if (!points.length) {
      $("rate-note").textContent = "no samples yet";
      return;
    }
    var t0 = points[0][0], t1 = points[points.length - 1][0];
    var max = Math.max.apply(null, points.map(function (p) { return p[1]; }).concat([1]));
    var xy = points.map(function (p) {
      var x = t1 > t0 ? (p[0] - t0) / (t1 - t0) * (W - 2 * pad) + pad : W / 2;
      var y = H - pad - p[1] / max * (H - 2 * pad);
      return x.toFixed(1) + "," + y.toFixed(1);
    });
    c.appendChild(svg("polyline", { points: pad + "," + (H - pad) + " " + xy.join(" ") + " " + (W - pad) + "," + (H - pad), "class": "area" }));
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

  var OUTCOMES = ["new", "changed", "unchanged", "failed"];
  function runs(d) {
    var body = $("runs-table").tBodies[0];
    clear(body);
    d.runs.slice().reverse().forEach(function (r) {
      body.appendChild(row([r.id, when(r.started_at), r.outcome, fmt(r.pages.pages), fmt(r.pages.new),
        fmt(r.pages.changed), fmt(r.pages.unchanged), fmt(r.pages.failed), fmt(r.items)]));
    });
    var c = $("runs-chart");
    clear(c);
    var W = 800, H = 200, n = d.runs.length;
    if (!n) return;
    var max = Math.max.apply(null, d.runs.map(function (r) { return r.pages.pages; }).concat([1]));
    var bw = W / n;
    d.runs.forEach(function (r, i) {
      var y = H;
      OUTCOMES.forEach(function (o) {
        var h = r.pages[o] / max * (H - 10);
        if (h <= 0) return;
        y -= h;
        var rect = svg("rect", { x: (i * bw + bw * 0.1).toFixed(1), y: y.toFixed(1), width: (bw * 0.8).toFixed(1), height: h.toFixed(1), "class": "bar " + o });
        var tip = svg("title", {});
        tip.textContent = "run " + r.id + ": " + r.pages[o] + " " + o;
        rect.appendChild(tip);
        c.appendChild(rect);
      });
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
