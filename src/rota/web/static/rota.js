// rota web UI: keeps the figures of a page fresh, asks before destructive actions,
// and measures the round trip to the server. No framework, no build step.
(function () {
  "use strict";

  var body = document.body;
  var every = parseInt(body.getAttribute("data-refresh") || "0", 10) * 1000;
  var status = document.getElementById("refresh-status");
  var busy = false;

  function say(text) {
    if (status) status.textContent = text;
  }

  function clock() {
    return new Date().toLocaleTimeString();
  }

  function duration(seconds) {
    var s = Math.floor(seconds);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + String(Math.floor(s % 86400 / 3600)).padStart(2, "0") + "h";
  }

  function pick(data, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? undefined : o[k]; }, data);
  }

  // Someone is using a control inside a refreshed region: do not pull it from under them.
  function interacting() {
    var el = document.activeElement;
    return el && el !== body && el.closest && el.closest("[data-live]") !== null;
  }

  // Pages whose JSON twin carries their figures: fill [data-key] elements from it.
  function refreshFromJson(url) {
    var started = performance.now();
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        var rtt = document.getElementById("browser-rtt");
        if (rtt) rtt.textContent = (performance.now() - started).toFixed(1);
        document.querySelectorAll("[data-key]").forEach(function (el) {
          var value = pick(data, el.getAttribute("data-key"));
          if (value === undefined) return;
          var format = el.getAttribute("data-format");
          if (format === "ms") value = Number(value).toFixed(2);
          else if (format === "duration") value = duration(Number(value));
          el.textContent = String(value);
        });
      });
  }

  // Other pages: fetch the page again and swap its [data-live] regions.
  function refreshFragments() {
    return fetch(location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var name = el.getAttribute("data-live");
          var next = fresh.querySelector('[data-live="' + name + '"]');
          if (next) el.replaceWith(document.importNode(next, true));
        });
      });
  }

  function refresh() {
    if (busy || document.hidden || interacting()) return;
    busy = true;
    var api = body.getAttribute("data-api");
    var job = document.getElementById("browser-rtt") && api ? refreshFromJson(api) : refreshFragments();
    job.then(function () { say("updated " + clock()); })
      .catch(function (err) { say("update failed (" + err.message + "), retrying"); })
      .then(function () { busy = false; });
  }

  if (every > 0) {
    setInterval(refresh, every);
    if (document.getElementById("browser-rtt")) refresh();
  }

  // Forms that destroy things ask first.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // Times: show them in the reader's own time zone on hover.
  document.addEventListener("mouseover", function (event) {
    var el = event.target;
    if (el.tagName === "TIME" && el.dateTime && !el.dataset.local) {
      el.dataset.local = "1";
      el.title = new Date(el.dateTime).toLocaleString() + " (your time)";
    }
  });
})();
