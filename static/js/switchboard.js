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

  // Time travel: the range slider and the number input show the same seq.
  document.addEventListener("input", function (e) {
    var other = e.target.getAttribute && e.target.getAttribute("data-sync");
    if (other) {
      var el = document.getElementById(other);
      if (el) el.value = e.target.value;
    }
  });

  // A live header carries the session's head seq: every count of the page follows it (the log's
  // "N in total", the facts panel's "at seq") and the seq inputs (time travel, jump) reach it.
  // After every swap, live (websocket) or not (an operator's own action, a filter).
  function followHead() {
    var header = document.querySelector("[data-head-seq]");
    if (!header) return;
    var head = header.getAttribute("data-head-seq");
    // Live (no moment shown), a seq input that stood at the head moves on with it; one the
    // person moved elsewhere stays where they put it.
    var moment = document.getElementById("moment");
    var live = !moment || !moment.getAttribute("data-at");
    document.querySelectorAll("input[data-follow-head]").forEach(function (el) {
      var atHead = el.value === el.max;
      el.max = head;
      if (live && atHead && document.activeElement !== el) el.value = head;
    });
    document.querySelectorAll("[data-head-count]").forEach(function (el) {
      if (el.textContent !== head) el.textContent = head;
    });
    // The working-state inspector, live at the head: fetched again at the new head.
    var inspector = document.querySelector("#inspector[data-follow-url]");
    if (live && inspector && inspector.getAttribute("data-seq") !== head && !inspector.hasAttribute("data-fetching") && window.htmx) {
      inspector.setAttribute("data-fetching", "");
      htmx.ajax("GET", inspector.getAttribute("data-follow-url") + "?at_seq=" + encodeURIComponent(head),
        {target: "#inspector", swap: "outerHTML"}).finally(function () {
        var now = document.getElementById("inspector");
        if (!now) return;
        now.removeAttribute("data-fetching");
        // The head may have moved on while this one was fetched (a pause then a resume): follow
        // it again, but only after a fetch that arrived (a failed one would loop).
        if (now.getAttribute("data-seq") === head) followHead();
      });
    }
  }
  ["htmx:oobAfterSwap", "htmx:afterSwap", "htmx:afterSettle", "htmx:wsAfterMessage"].forEach(function (name) {
    document.addEventListener(name, followHead);
  });

  // Time travel (session page): after a moment is shown (#moment swapped), the slider and the
  // seq input show its seq, or the head once back to live; the log scrolls to the moment's row
  // (marked data-scroll-moment: once, on the first render and after each move).
  function showMoment() {
    var moment = document.getElementById("moment");
    if (moment) {
      var at = moment.getAttribute("data-at");
      var header = document.querySelector("[data-head-seq]");
      var seq = at !== "" && at !== null ? at : (header ? header.getAttribute("data-head-seq") : null);
      if (seq !== null) {
        ["at-seq-range", "at-seq-number"].forEach(function (id) {
          var el = document.getElementById(id);
          if (el && el !== document.activeElement) el.value = seq;
        });
      }
    }
    var row = document.querySelector("[data-scroll-moment]");
    if (row) {
      row.removeAttribute("data-scroll-moment");
      row.scrollIntoView({ block: "center" });
    }
  }
  document.addEventListener("DOMContentLoaded", showMoment);
  document.addEventListener("htmx:historyRestore", showMoment);  // Back/Forward between moments
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.target && (e.target.id === "moment" || e.target.id === "event-log")) showMoment();
  });

  // Live rows are inserted, never replaced: a reconnecting socket catches up from the page's
  // first head, so drop any row the page already shows. Only for insertions (afterbegin,
  // beforeend: htmx hands over the element); a panel replaced whole (hx-swap-oob="true":
  // htmx hands over a document fragment) brings its rows along, the shown ones included.
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var fragment = e.detail && e.detail.fragment;
    if (!fragment || !fragment.querySelectorAll || fragment.nodeType === 11) return;
    fragment.querySelectorAll("[data-live-row][id]").forEach(function (row) {
      if (document.getElementById(row.id)) row.remove();
    });
  });

  // A live push that swaps a panel moves its preserved fields (hx-preserve) into the new
  // panel, and a moved field loses focus: the person who was typing in it (a reject reason
  // opened with "r" as the claim's own push arrived) keeps it, caret included. Only for pushes
  // (the socket's messages), never after the person's own requests.
  var typingIn = null;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var el = document.activeElement;
    typingIn = el && el.id && el.matches && el.matches("input, textarea, select")
      ? {id: el.id, start: el.selectionStart, end: el.selectionEnd} : null;
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var kept = typingIn;
    typingIn = null;
    if (!kept) return;
    var el = document.getElementById(kept.id);
    var now = document.activeElement;
    if (!el || now === el || (now && now !== document.body)) return;  // kept, or moved on
    el.focus();
    try { if (kept.start !== null) el.setSelectionRange(kept.start, kept.end); } catch (err) { /* not a text field */ }
  });

  // <select data-autosubmit> submits its form on change (a <noscript> button does without JS).
  document.addEventListener("change", function (e) {
    if (e.target.matches && e.target.matches("select[data-autosubmit]") && e.target.form) {
      e.target.form.submit();
    }
  });

  // Live panels keep what is being typed (hx-preserve); a form marked data-reset-on-success
  // (a message, a fact, an answer) empties its fields once the server has taken them.
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = e.detail && e.detail.elt;
    if (!e.detail.successful || !form || !form.matches || !form.matches("form[data-reset-on-success][id]")) return;
    document.querySelectorAll('[form="' + form.id + '"]').forEach(function (field) {
      if (field.matches("textarea, input[type=text], input:not([type])")) field.value = "";
      if (field.matches("input[type=radio], input[type=checkbox]")) field.checked = false;
      if (field.matches("[data-draft][id]")) forgetDraft(field);
    });
  });

  // Drafts: a field marked data-draft keeps what is typed in sessionStorage (per page and
  // field), so it survives a lost claim (its panel re-rendered without it), a refused send, a
  // reload and a re-claim; it comes back whenever the field does. Sent: forgotten.
  function draftKey(field) { return "switchboard.draft:" + location.pathname + "#" + field.id; }
  function forgetDraft(field) { try { sessionStorage.removeItem(draftKey(field)); } catch (err) { /* storage off */ } }
  document.addEventListener("input", function (e) {
    if (!e.target.matches || !e.target.matches("[data-draft][id]")) return;
    try { sessionStorage.setItem(draftKey(e.target), e.target.value); } catch (err) { /* storage off */ }
  });
  function restoreDrafts() {
    document.querySelectorAll("[data-draft][id]").forEach(function (field) {
      var kept = null;
      try { kept = sessionStorage.getItem(draftKey(field)); } catch (err) { return; }
      if (kept !== null && field.value !== kept && field !== document.activeElement) field.value = kept;
    });
  }

  // The lease keeper (the handoff workspace): while #handoff-holder says the lease is this
  // user's, fire #lease-keeper every data-renew-every seconds (a third of the server's lease);
  // each render of #handoff-holder tells how long the lease has left, and when that time passes
  // with no newer render (renewals refused or not getting through) the claim shows as lost at
  // once, with its Claim button, and one more renewal asks the server for the page as it is.
  var lease = { every: 0, timer: null, expiry: null };
  function leaseStop() {
    clearInterval(lease.timer);
    clearTimeout(lease.expiry);
    lease.timer = lease.expiry = null;
    lease.every = 0;
  }
  function leaseRenew() {
    var keeper = document.getElementById("lease-keeper");
    if (keeper && window.htmx) window.htmx.trigger(keeper, "lease-renew");
  }
  function leaseLost() {
    leaseStop();
    document.querySelectorAll("[data-lease-lost]").forEach(function (el) { el.hidden = false; });
    // The holder's actions would be refused now: only the notice and its Claim button stay
    // (a send is left to try: its refusal brings the server's page, the answer kept).
    document.querySelectorAll("#handoff-actions > :not([data-lease-lost]):not([hx-preserve]), [data-lease-held]").forEach(function (el) { el.style.display = "none"; });
    var said = document.getElementById("action-result");
    if (said) said.textContent = "";
    leaseRenew();
  }
  function leaseSync() {
    var keeper = document.getElementById("lease-keeper");
    var holder = document.getElementById("handoff-holder");
    if (!keeper || !holder || holder.getAttribute("data-lease-mine") !== "true") {
      leaseStop();
      return;
    }
    if (holder.hasAttribute("data-lease-counted")) return;  // this render is counted already
    holder.setAttribute("data-lease-counted", "");
    var every = parseFloat(keeper.getAttribute("data-renew-every")) * 1000;
    if (!lease.timer || lease.every !== every) {
      clearInterval(lease.timer);
      lease.every = every;
      lease.timer = setInterval(leaseRenew, every);
    }
    clearTimeout(lease.expiry);
    var left = parseFloat(holder.getAttribute("data-lease-remaining")) * 1000;
    lease.expiry = setTimeout(leaseLost, isNaN(left) ? 0 : left);
  }
  function workspaceSettled() { leaseSync(); restoreDrafts(); }
  document.addEventListener("DOMContentLoaded", workspaceSettled);
  ["htmx:afterSettle", "htmx:oobAfterSwap", "htmx:wsAfterMessage"].forEach(function (name) {
    document.addEventListener(name, workspaceSettled);
  });
  // A tab in the background may have its timers slowed: renew as soon as it is seen again.
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible" && lease.timer) leaseRenew();
  });

  // <button data-confirm="Question?" form="…"> asks before its (htmx) form is sent: the
  // question says what this button does (the workspace's hand back, release).
  document.addEventListener("htmx:confirm", function (e) {
    var trigger = e.detail && e.detail.triggeringEvent;
    var button = trigger && trigger.submitter;
    var question = button && button.getAttribute && button.getAttribute("data-confirm");
    if (!question) return;
    e.preventDefault();
    if (window.confirm(question)) e.detail.issueRequest(true);
  });

  // Websocket status dot. A dot marked data-live-partial (the server hears only its own
  // changes: templates/_live_status.html) never claims to be live; its title says why. The
  // navigation's own socket (data-live-nav) says nothing about the page's feed.
  document.addEventListener("htmx:wsOpen", function (e) {
    if (e.target && e.target.closest && e.target.closest("[data-live-nav]")) return;
    document.querySelectorAll(".live-dot:not([data-live-partial])").forEach(function (d) { d.classList.add("on"); d.title = "Live"; });
  });
  document.addEventListener("htmx:wsClose", function (e) {
    if (e.target && e.target.closest && e.target.closest("[data-live-nav]")) return;
    document.querySelectorAll(".live-dot:not([data-live-partial])").forEach(function (d) { d.classList.remove("on"); d.title = "Reconnecting…"; });
  });

  // <button data-copy="ID"> copies the text of #ID (a new API key's secret) to the clipboard.
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var text = source.textContent.trim();
    var label = button.textContent;
    function done(ok) {
      button.textContent = ok ? (button.getAttribute("data-copied-label") || "Copied") : "Select and copy";
      button.setAttribute("data-copied", ok ? "true" : "false");
      setTimeout(function () { button.textContent = label; }, 2500);
    }
    function selectText() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { selectText(); done(false); });
    } else {
      selectText();
      done(false);
    }
  });

  // <form data-confirm="Question?"> asks before it submits (revoking a key, removing a member).
  document.addEventListener("submit", function (e) {
    var question = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });

  // <button data-add-override="PREFIX"> adds one more form of a Django formset from its
  // <template> (the page already shows one blank form: without this file, add one per save).
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-add-override]");
    if (!button) return;
    var prefix = button.getAttribute("data-add-override");
    var total = document.getElementById("id_" + prefix + "-TOTAL_FORMS");
    var template = document.getElementById("override-template");
    var list = document.getElementById("overrides");
    if (!total || !template || !list) return;
    var index = parseInt(total.value, 10) || 0;
    var holder = document.createElement("div");
    holder.innerHTML = template.innerHTML.replace(/__prefix__/g, String(index));
    var form = holder.firstElementChild;
    list.appendChild(form);
    total.value = String(index + 1);
    var select = form.querySelector("select");
    if (select) select.focus();
  });
})();
