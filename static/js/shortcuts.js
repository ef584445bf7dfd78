// Keyboard shortcuts of the handoff queue and workspace (templates/switchboard/_shortcuts.html
// says which page and lists them in its help dialog). Every action presses the page's own
// button or submits its own form, so the server decides as it does for a click (CSRF, the
// confirmations, the role, the lease): a key can do nothing the page does not offer. Keys
// wait while a field has the focus (Esc leaves it) and never act with Ctrl, Alt or Meta.
(function () {
  "use strict";

  var root = null;
  var help = null;
  var said = null;
  var selectedId = null;      // the queue row chosen with j/k, by its element id
  var focusedByKeys = false;  // the selection's link got the focus from a key, not a click

  function typingIn(el) {
    if (!el || el === document.body) return false;
    if (el.isContentEditable) return true;
    return el.matches("input, textarea, select");
  }

  function shown(el) { return !!el && !el.disabled && el.getClientRects().length > 0; }

  // The status line stays in the page (a live region is announced only if it was there
  // before its text changed); empty, it takes no room (handoff_aids.css).
  function say(text) {
    if (said) said.textContent = text;
  }

  // --- Help ----------------------------------------------------------------------------------
  function openHelp() {
    if (!help || help.open) return;
    say("");
    help.showModal();  // a modal dialog: focus moves in (its Close button), Esc closes it
  }
  function toggleHelp() {
    if (!help) return;
    if (help.open) help.close(); else openHelp();
  }

  // --- Queue ---------------------------------------------------------------------------------
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("#queue-rows tr.queue-row[id]")); }
  function selectedRow() { return selectedId ? document.getElementById(selectedId) : null; }
  function rowLink(row) { return row && row.querySelector("td.reason a[href]"); }

  function mark(row, focus) {
    rows().forEach(function (r) {
      if (r !== row) { r.classList.remove("kbd-selected"); r.removeAttribute("aria-current"); }
    });
    if (!row) { selectedId = null; return; }
    selectedId = row.id;
    row.classList.add("kbd-selected");
    row.setAttribute("aria-current", "true");
    var link = rowLink(row);
    if (focus && link) {
      focusedByKeys = true;
      link.focus({ preventScroll: true });
    }
    row.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    var all = rows();
    if (!all.length) { say("No handoff in this list."); return; }
    var at = all.indexOf(selectedRow());
    var next = at < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(all.length - 1, Math.max(0, at + step));
    say("");
    mark(all[next], true);
  }

  function openSelected() {
    var link = rowLink(selectedRow());
    if (!link) { say("Choose a handoff first: j and k move through the list."); return; }
    window.location.assign(link.href);
  }

  function claimSelected() {
    var form = document.getElementById("shortcut-claim");
    if (!form) { say("Operators claim handoffs; you can read them."); return; }
    var row = selectedRow();
    if (!row) { say("Choose a handoff first: j and k move through the list."); return; }
    if (row.getAttribute("data-status") !== "open") { say("Only a waiting handoff can be claimed; this one is held or answered."); return; }
    // A plain POST of the page's own claim form (CSRF token inside): the server claims and
    // opens the workspace, or answers with its page saying why not.
    form.action = form.getAttribute("data-action-pattern").replace(form.getAttribute("data-id-placeholder"), row.id.replace("handoff-row-", ""));
    form.submit();
  }

  // Live pushes replace the queue's rows: the chosen one stays chosen (by id), or its
  // neighbour when it left the list; the keyboard's focus comes along if it was there.
  function reselect() {
    if (!selectedId || !root || root.getAttribute("data-shortcuts") !== "queue") return;
    var row = selectedRow();
    var keepFocus = focusedByKeys && (document.activeElement === document.body || !document.activeElement);
    if (row) { mark(row, keepFocus); return; }
    var first = rows()[0];
    mark(first || null, keepFocus);
  }

  // --- Workspace -----------------------------------------------------------------------------
  function press(selectors, missing) {
    for (var i = 0; i < selectors.length; i++) {
      var button = document.querySelector(selectors[i]);
      if (shown(button)) { say(""); button.click(); return; }
    }
    say(missing);
  }

  function focusField(id, hint, missing) {
    var field = document.getElementById(id);
    if (!field || field.disabled) { say(missing); return; }
    var details = field.closest("details");
    if (details && !details.open) details.open = true;
    if (!shown(field)) { say(missing); return; }
    field.focus();
    field.scrollIntoView({ block: "center" });
    say(hint);
  }

  var workspaceKeys = {
    c: function () { press(["#claim-button", "#reclaim-button"], "Nothing to claim here: it is held, over, or yours already."); },
    a: function () { press(["#accept-button", "button[form='hf-budget'][type='submit']"], "Nothing to approve here."); },
    e: function () { focusField("edit-args", "Edit the arguments, then Preview the changes (Tab, Enter).", "These arguments cannot be edited here."); },
    r: function () { focusField("reject-reason", "Why not (optional): Enter rejects, Esc leaves the field.", "Nothing to reject here."); },
    n: function () {
      var url = root.getAttribute("data-next-url");
      if (url) window.location.assign(url); else say("Operators go on to the next handoff; you can read this one.");
    }
  };

  var queueKeys = {
    j: function () { move(1); },
    arrowdown: function () { move(1); },
    k: function () { move(-1); },
    arrowup: function () { move(-1); },
    o: openSelected,
    enter: openSelected,
    c: claimSelected,
    n: function () {
      var url = root.getAttribute("data-next-url");
      if (url) window.location.assign(url); else say("Operators claim handoffs; you can read them.");
    }
  };

  function onKey(e) {
    if (e.defaultPrevented || e.isComposing || e.ctrlKey || e.altKey || e.metaKey) return;
    var active = document.activeElement;
    if (e.key === "Escape") {
      // A modal dialog closes itself on Esc; a field is left, so the keys work again.
      if (!(help && help.open) && typingIn(active)) { active.blur(); say(""); }
      return;
    }
    if (typingIn(active)) return;
    if (e.key === "?") { e.preventDefault(); toggleHelp(); return; }
    if (e.shiftKey || (help && help.open)) return;
    var key = e.key.toLowerCase();
    // Enter on a link or button does what it always does.
    if (key === "enter" && active && active !== document.body && active.matches("a[href], button, summary, [tabindex]:not(main)") && !(active.closest && active.closest("#queue-rows"))) return;
    var keys = root.getAttribute("data-shortcuts") === "queue" ? queueKeys : workspaceKeys;
    var action = keys[key];
    if (!action || (e.repeat && "jk".indexOf(key) < 0 && key.indexOf("arrow") !== 0)) return;
    e.preventDefault();
    action();
  }

  function start() {
    root = document.querySelector("[data-shortcuts]");
    if (!root) return;
    help = document.getElementById("shortcut-help");
    said = document.getElementById("shortcut-said");
    document.addEventListener("keydown", onKey);
    document.addEventListener("click", function (e) {
      if (e.target.closest && e.target.closest("[data-shortcut-help]")) openHelp();
    });
    document.addEventListener("focusin", function (e) {
      if (!selectedId || e.target !== rowLink(selectedRow())) focusedByKeys = false;
    });
    ["htmx:oobAfterSwap", "htmx:afterSwap", "htmx:wsAfterMessage"].forEach(function (name) {
      document.addEventListener(name, reselect);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
