// Small progressive enhancements; every page works without this file.
(function () {
  "use strict";
  var units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
  var fmt = typeof Intl !== "undefined" && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat("en", { numeric: "auto" }) : null;

  // <time datetime="ISO" data-relative> shows "3 minutes ago"; the exact time stays in title.
  function relativize(root) {
    if (!fmt) return;
    root.querySelectorAll("time[data-relative]").forEach(function (el) {
      var then = new Date(el.getAttribute("datetime"));
      if (isNaN(then)) return;
      var seconds = Math.round((then - Date.now()) / 1000);
      for (var i = 0; i < units.length; i++) {
        if (Math.abs(seconds) >= units[i][1] || units[i][0] === "second") {
          el.textContent = fmt.format(Math.round(seconds / units[i][1]), units[i][0]);
          break;
        }
      }
      if (!el.title) el.title = then.toLocaleString();
    });
  }

  document.addEventListener("DOMContentLoaded", function () { relativize(document); });
  document.addEventListener("htmx:load", function (e) { relativize(e.target); });
  setInterval(function () { relativize(document); }, 30000);

  // Websocket status dot.
  document.addEventListener("htmx:wsOpen", function () {
    document.querySelectorAll(".live-dot").forEach(function (d) { d.classList.add("on"); d.title = "Live"; });
  });
  document.addEventListener("htmx:wsClose", function () {
    document.querySelectorAll(".live-dot").forEach(function (d) { d.classList.remove("on"); d.title = "Reconnecting…"; });
  });
})();
