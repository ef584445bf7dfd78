"""Headless Chromium for the stored-XSS probe, in a thread of its own.

Sync Playwright registers an event loop as running in the thread that starts it; the browser
tests (tests/browser) start theirs in the main thread for the whole session. Driving this
probe's browser from a worker thread keeps the two apart whichever runs first, and keeps the
main thread's database calls legal. The thread touches no ORM: it gets URLs, cookies and
callbacks that speak HTTP, and returns plain results.

Each visit loads one page, optionally swaps htmx fragments into it and waits for live updates,
then reads what a script could have done: calls of `window.__xss(id)` (the payloads call it),
dialogs (alert/confirm/prompt), CSP violations (an injected inline script or handler that the
Content-Security-Policy blocked is still an injection), elements carrying a payload's
`data-xss` attribute, frames, and `javascript:` URLs in links, sources and forms.
"""

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS

WATCH = """
window.__xss_hits = [];
window.__xss = function (id) { window.__xss_hits.push(String(id)); };
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || ""));
});
"""

READ = r"""
() => {
  const url = (e) => ["href", "src", "action", "formaction", "xlink:href"]
    .map((a) => e.getAttribute(a) || "").find((v) => /^\s*javascript:/i.test(v));
  const markers = new Set(document.documentElement.outerHTML.match(/q\d{3}q/g) || []);
  return {
    hits: window.__xss_hits || [],
    csp: window.__csp || [],
    injected: [...document.querySelectorAll("[data-xss]")].map(
      (e) => e.tagName.toLowerCase() + "#" + e.getAttribute("data-xss")),
    frames: [...document.querySelectorAll("iframe, frame, object, embed")].map(
      (e) => e.outerHTML.slice(0, 120)),
    js_urls: [...document.querySelectorAll("*")].filter(url).map((e) => e.outerHTML.slice(0, 120)),
    markers: [...markers],
  };
}
"""

SETTLED_AFTER_CLICK = """
(element) => new Promise((resolve) => {
  // Settled when the htmx request it starts is swapped in; at once if it starts none.
  let started = false;
  document.addEventListener("htmx:beforeRequest", () => { started = true; }, {once: true});
  document.addEventListener("htmx:afterSettle", () => setTimeout(resolve, 50), {once: true});
  element.click();
  setTimeout(() => { if (!started) resolve(); }, 100);
  setTimeout(resolve, 5000);
})
"""

SWAP = """
(a) => new Promise((resolve) => {
  const done = () => setTimeout(resolve, 150);
  if (!document.querySelector(a.target)) { resolve(false); return; }
  htmx.ajax("GET", a.url, {target: a.target, swap: "outerHTML"}).then(done, done);
})
"""


@dataclass
class Visit:
    """One page load, as the user named by `who` (a key of the cookies given to run())."""

    url: str
    who: str = "admin"
    # htmx fragments to swap in after the load: (url, target selector).
    swaps: list[tuple[str, str]] = field(default_factory=list)
    # Elements to click after the load (e.g. "load more"), then wait for htmx to settle.
    clicks: list[str] = field(default_factory=list)
    # Live updates: a callback (HTTP only) run with the page open, and the marker to wait for.
    live: list[tuple[Callable[[], None], str]] = field(default_factory=list)


@dataclass
class Seen:
    url: str
    hits: list[str]
    dialogs: list[str]
    csp: list[str]
    injected: list[str]
    frames: list[str]
    js_urls: list[str]
    markers: set[str]
    swaps: int = 0
    clicks: int = 0
    live_seen: int = 0
    live_missed: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ran(self) -> list[str]:
        """What executed or was injected: must be empty."""
        return [
            *(f"executed {h}" for h in self.hits),
            *(f"dialog {d}" for d in self.dialogs),
            *(f"blocked by CSP: {c}" for c in self.csp),
            *(f"injected element {i}" for i in self.injected),
            *(f"frame {f}" for f in self.frames),
            *(f"javascript: URL {u}" for u in self.js_urls),
        ]


def _run(base_url: str, cookies: dict[str, dict[str, str]], visits: list[Visit]) -> list[Seen]:
    from playwright.sync_api import sync_playwright

    seen: list[Seen] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            contexts = {}
            for who, jar in cookies.items():
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(WATCH)
                if jar:
                    context.add_cookies(
                        [{"name": k, "value": v, "url": base_url} for k, v in jar.items()]
                    )
                contexts[who] = context
            pages = {who: context.new_page() for who, context in contexts.items()}
            dialogs: dict[str, list[str]] = {who: [] for who in pages}
            for who, page in pages.items():
                page.on(
                    "dialog",
                    lambda d, who=who: (dialogs[who].append(f"{d.type}: {d.message}"), d.dismiss()),
                )
            for visit in visits:
                page = pages[visit.who]
                started = time.monotonic()
                dialogs[visit.who].clear()
                # "load" waits for every image, failed ones too: their onerror has had its turn.
                page.goto(base_url + visit.url, wait_until="load")
                swaps = clicks = live_seen = 0
                missed = []
                for url, target in visit.swaps:
                    if page.evaluate(SWAP, {"url": url, "target": target}) is not False:
                        swaps += 1
                for selector in visit.clicks:
                    for element in page.query_selector_all(selector):
                        if element.is_visible():
                            page.evaluate(SETTLED_AFTER_CLICK, element)
                            clicks += 1
                if visit.live:
                    page.wait_for_selector(".live-dot.on", state="attached", timeout=10_000)
                for push, marker in visit.live:
                    push()
                    try:
                        page.wait_for_function(
                            "m => document.documentElement.outerHTML.includes(m)",
                            arg=marker,
                            timeout=8_000,
                        )
                        live_seen += 1
                    except Exception:  # noqa: BLE001 - reported as missed, not fatal
                        missed.append(marker)
                page.wait_for_timeout(50)  # anything queued behind the load event
                read = page.evaluate(READ)
                seen.append(
                    Seen(
                        url=visit.url,
                        hits=read["hits"],
                        dialogs=list(dialogs[visit.who]),
                        csp=read["csp"],
                        injected=read["injected"],
                        frames=read["frames"],
                        js_urls=read["js_urls"],
                        markers=set(read["markers"]),
                        swaps=swaps,
                        clicks=clicks,
                        live_seen=live_seen,
                        live_missed=missed,
                        seconds=time.monotonic() - started,
                    )
                )
        finally:
            browser.close()
    return seen


def run(base_url: str, cookies: dict[str, dict[str, str]], visits: list[Visit]) -> list[Seen]:
    """Drive the visits in order in a fresh Chromium, from a worker thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_run, base_url, cookies, visits).result(timeout=600)


def available() -> bool:
    return Path(CHROMIUM).exists()
