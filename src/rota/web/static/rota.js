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
          if (next) el.replaceWith(keepTicks(el, document.importNode(next, true)));
        });
        countTicks();
      });
  }

  // The pointer rests on a refreshed table: its rows stay where they are (a row that
  // moved would put another job under a click about to happen). The refresh waits, and
  // comes as soon as the pointer leaves the table.
  var held = false;
  function pointed() {
    return document.querySelector("[data-live] table:hover") !== null;
  }

  document.addEventListener("mouseout", function (event) {
    if (!held) return;
    var to = event.relatedTarget;
    if (to && to.closest && to.closest("[data-live] table")) return;
    held = false;
    refresh();
  });

  // Rows are ticked for "retry selected" / "delete selected": the refresh waits until
  // none is (a refresh could drop a ticked row that left the list, or move the others
  // under the next click), and says so; it comes as soon as the last box is unticked.
  var paused = false;
  function ticked() {
    return document.querySelector('[data-live] input[type="checkbox"][name]:checked') !== null;
  }

  function pause(on) {
    paused = on;
    if (status) status.classList.toggle("paused", on);
    if (on) say("paused while rows are ticked");
  }

  function refresh() {
    if (busy || document.hidden) return;
    if (every > 0 && ticked()) {
      pause(true);
      return;
    }
    if (paused) pause(false);
    if (interacting()) return;
    if (pointed()) {
      held = true;
      say("held while the pointer is on the table");
      return;
    }
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

  // Rows ticked for "retry selected" / "delete selected" stay ticked when the region
  // they are in is refreshed (a row that left the list leaves the selection).
  function keepTicks(old, fresh) {
    var ticked = {};
    old.querySelectorAll('input[type="checkbox"][name]:checked').forEach(function (box) {
      ticked[box.name + "\n" + box.value] = true;
    });
    fresh.querySelectorAll('input[type="checkbox"][name]').forEach(function (box) {
      if (ticked[box.name + "\n" + box.value]) box.checked = true;
    });
    return fresh;
  }

  // (form.id would be the form's inputs named "id": the attribute is read instead)
  function ticks(form) {
    var id = form.getAttribute("id");
    return document.querySelectorAll('input[type="checkbox"][name="id"][form="' + id + '"]');
  }

  // Each selection form says how many rows are ticked, and offers its buttons only then;
  // its "every job of this page" box follows the rows.
  function countTicks() {
    document.querySelectorAll("form[data-selected]").forEach(function (form) {
      var boxes = ticks(form);
      var n = Array.prototype.filter.call(boxes, function (b) { return b.checked; }).length;
      var count = form.querySelector(".selected-count");
      if (count) count.textContent = n ? n + " selected" : "";
      form.querySelectorAll('button[type="submit"]').forEach(function (b) { b.disabled = n === 0; });
      var every = document.querySelectorAll('[data-select-all="' + form.getAttribute("id") + '"]');
      every.forEach(function (box) {
        box.hidden = false;
        box.checked = boxes.length > 0 && n === boxes.length;
        box.indeterminate = n > 0 && n < boxes.length;
      });
    });
  }

  document.addEventListener("change", function (event) {
    var el = event.target;
    var form = el.getAttribute && el.getAttribute("data-select-all");
    if (form) {
      var target = document.getElementById(form);
      if (target) ticks(target).forEach(function (b) { b.checked = el.checked; });
    }
    if (form || (el.name === "id" && el.getAttribute("form"))) countTicks();
    if (el.type === "checkbox" && every > 0) {
      if (ticked()) pause(true);
      else if (paused) {
        pause(false);
        refresh();
      }
    }
  });
  countTicks();

  // Forms that destroy things ask first (the button's own question, else the form's;
  // "{n}": how many rows are ticked).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    var question = (button && button.getAttribute("data-confirm")) ||
      (form.getAttribute && form.getAttribute("data-confirm"));
    if (question && form.hasAttribute("data-selected")) {
      var n = Array.prototype.filter.call(ticks(form), function (b) { return b.checked; }).length;
      question = question.replace("{n}", String(n));
    }
    if (question && !window.confirm(question)) event.preventDefault();
  });

  // The JSON editor (enqueue, edit then retry): says as one types whether the text is
  // JSON. A hint only: the server checks what is sent, and its answer is the one shown.
  function checkJson(area) {
    var out = document.getElementById(area.getAttribute("aria-describedby"));
    var text = area.value.trim();
    var error = "";
    if (text) {
      try {
        var value = JSON.parse(text);
        if (value === null || typeof value !== "object") error = "args: a JSON array or object";
      } catch (e) {
        error = "not JSON: " + e.message;
      }
    }
    area.setAttribute("aria-invalid", error ? "true" : "false");
    if (out) {
      out.textContent = error || (text ? "valid JSON" : "");
      out.classList.toggle("bad", !!error);
    }
  }
  document.addEventListener("input", function (event) {
    if (event.target.hasAttribute && event.target.hasAttribute("data-json")) checkJson(event.target);
  });
  Array.prototype.forEach.call(document.querySelectorAll("textarea[data-json]"), checkJson);

  // Times: show them in the reader's own time zone on hover.
  document.addEventListener("mouseover", function (event) {
    var el = event.target;
    if (el.tagName === "TIME" && el.dateTime && !el.dataset.local) {
      el.dataset.local = "1";
      el.title = new Date(el.dateTime).toLocaleString() + " (your time)";
    }
  });
})();
