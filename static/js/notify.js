// Browser notifications of waiting handoffs (issue 26 §4), on every project page.
//
// Opt-in per project: the "Notify me" button in the navigation asks the browser's permission
// only when clicked, and remembers the choice in localStorage ("switchboard.notify.<project>").
// While it is on, the script fetches the waiting handoffs once (data-waiting-url) and the page's
// live feed swaps in each later list (#handoff-notify-marks) with the navigation's count;
// compared with the last list it saw, a handoff not seen and newer than any seen is "new", one
// seen become overdue or urgent is "overdue"/"urgent".
// While the tab is hidden each shows a Notification; clicking it focuses the tab and opens the
// handoff. Titles and bodies are plain strings (the Notifications API shows no markup).
(function () {
  "use strict";
  var toggle = document.getElementById("notify-toggle");
  if (!toggle || !("Notification" in window)) return;
  var storageKey = "switchboard.notify." + toggle.getAttribute("data-project");
  var seen = {}; // handoff id -> {overdue, urgent}
  var newest = 0; // the newest request time seen, ms
  var baseline = false; // a first list read (nothing in it is news)
  var fetching = false;

  function wanted() {
    try { return window.localStorage.getItem(storageKey) === "on"; } catch (e) { return false; }
  }
  function remember(on) {
    try {
      if (on) window.localStorage.setItem(storageKey, "on");
      else window.localStorage.removeItem(storageKey);
    } catch (e) { /* private mode: the toggle lasts for this page only */ }
  }
  function active() { return wanted() && Notification.permission === "granted"; }

  function show() {
    var on = active();
    toggle.setAttribute("aria-pressed", on ? "true" : "false");
    toggle.textContent = on ? "Notifying" : "Notify me";
    if (Notification.permission === "denied") {
      toggle.title = "This browser blocks notifications from this site: allow them in its site settings, then click again.";
    } else if (on) {
      toggle.title = "A browser notification when a handoff arrives or becomes overdue while this tab is hidden. Click to stop.";
    } else {
      toggle.title = "Get a browser notification when a handoff arrives or becomes overdue while this tab is hidden.";
    }
  }

  // The first list, fetched once notifications are on: what is waiting now is not news.
  function fetchBaseline() {
    if (baseline || fetching || !active()) return;
    fetching = true;
    fetch(toggle.getAttribute("data-waiting-url"), { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : ""; })
      .then(function (html) {
        fetching = false;
        if (!html || baseline) return;
        // Parsed inert (DOMParser runs no script); only its data attributes and text are read.
        var list = new DOMParser().parseFromString(html, "text/html").getElementById("handoff-notify-marks");
        if (list) read(list, true);
      }, function () { fetching = false; });
  }

  toggle.addEventListener("click", function () {
    if (active()) { remember(false); show(); return; }
    if (Notification.permission === "granted") { remember(true); show(); fetchBaseline(); return; }
    // Asked only here, on the person's click (browsers ignore or penalise unprompted asks).
    Notification.requestPermission().then(function (permission) {
      remember(permission === "granted");
      show();
      fetchBaseline();
    });
  });

  function text(value, limit) {
    value = (value || "").replace(/\s+/g, " ").trim();
    return value.length > limit ? value.slice(0, limit - 1) + "…" : value;
  }

  function notify(what, item) {
    if (!active() || document.visibilityState !== "hidden") return;
    var kind = text(item.getAttribute("data-kind"), 40).toLowerCase();
    var agent = text(item.getAttribute("data-agent"), 80);
    var heads = { "new": "Handoff waiting", overdue: "Handoff overdue", urgent: "Handoff urgent" };
    var title = heads[what] + ": " + kind + " from " + agent;
    var url = item.getAttribute("data-url") || "";
    var shown;
    try {
      shown = new Notification(title, {
        body: text(item.textContent, 180) || "No reason given.",
        tag: "switchboard-handoff-" + item.getAttribute("data-id") + "-" + what,
      });
    } catch (e) { return; } // a browser that allows them only from a service worker
    shown.onclick = function () {
      window.focus();
      shown.close();
      if (url.charAt(0) === "/") window.location.assign(url); // our own path, nothing else
    };
  }

  function read(list, first) {
    if (first) {
      baseline = true;
      newest = Math.max(newest, Date.parse(list.getAttribute("data-now") || "") || 0);
    }
    var news = [];
    var latest = newest;
    Array.prototype.forEach.call(list.querySelectorAll("li[data-id]"), function (item) {
      var id = item.getAttribute("data-id");
      var mark = {
        overdue: item.getAttribute("data-overdue") === "1",
        urgent: item.getAttribute("data-priority") === "urgent",
      };
      var created = Date.parse(item.getAttribute("data-created") || "") || 0;
      var before = seen[id];
      if (!first) {
        if (!before && created > newest) news.push(["new", item]);
        else if (before && mark.overdue && !before.overdue) news.push(["overdue", item]);
        else if (before && mark.urgent && !before.urgent) news.push(["urgent", item]);
      }
      seen[id] = mark;
      if (created > latest) latest = created;
    });
    newest = latest;
    news.forEach(function (entry) { notify(entry[0], entry[1]); });
  }

  toggle.hidden = false;
  show();
  fetchBaseline();
  // The live feed replaces the list (an out-of-band swap): read each new one (the first one
  // read, if it beats the fetch, is the baseline).
  var nav = toggle.parentNode;
  new MutationObserver(function (changes) {
    for (var i = 0; i < changes.length; i++) {
      for (var j = 0; j < changes[i].addedNodes.length; j++) {
        var node = changes[i].addedNodes[j];
        if (node.id === "handoff-notify-marks") { read(node, !baseline); return; }
      }
    }
  }).observe(nav, { childList: true });
  // Permission changed in the browser's settings meanwhile: say so when the person comes back.
  document.addEventListener("visibilitychange", show);
})();
