"""Screenshots of the dashboard as an operator sees it, for a walk-through or a review.

Run it against a running Switchboard (e.g. `bash scripts/run`, which seeds the demo and starts
simulated agents), after letting the agents work for a while:

    .venv/bin/python scripts/walkthrough_screenshots.py --base-url http://127.0.0.1:8000 \
        --wait 60 --out test-artifacts/walkthrough

It signs in (admin / switchboard-admin, the demo's admin), then saves: the sessions list under
each sort, the busiest session's page live and at a past seq (`?at=`), the overview and the
tasks list. Debian's /usr/bin/chromium through Playwright (both in the dev dependencies).
"""

import argparse
import re
import sys
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SORTS = {
    "newest": "-created",
    "oldest": "created",
    "recently-active": "-updated",
    "least-recently-active": "updated",
}


def sign_in(page: Page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def shoot(page: Page, url: str, path: Path, *, full_page: bool = True) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(path), full_page=full_page)
    print(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--wait", type=float, default=0, help="Seconds to let agents work first.")
    parser.add_argument("--out", default="test-artifacts/walkthrough")
    parser.add_argument("--username", default="admin")
    parser.add_argument("--password", default="switchboard-admin")
    parser.add_argument("--width", type=int, default=1440)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = args.base_url.rstrip("/")
    if args.wait:
        print(f"Letting the agents work for {args.wait:.0f} s…", file=sys.stderr)
        time.sleep(args.wait)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": 1000})
        sign_in(page, base, args.username, args.password)
        # The project's overview is where the sign-in lands: /p/<id>/
        match = re.search(r"/p/(\d+)/", page.url)
        if match is None:
            page.goto(f"{base}/")
            match = re.search(r"/p/(\d+)/", page.url)
        if match is None:
            print(f"No project page after sign-in (at {page.url})", file=sys.stderr)
            return 1
        project = f"{base}/p/{match.group(1)}"
        shoot(page, f"{project}/", out / "overview.png")
        for name, sort in SORTS.items():
            shoot(page, f"{project}/sessions/?sort={sort}", out / f"sessions-{name}.png")
        shoot(page, f"{project}/tasks/", out / "tasks.png")
        # The most recently active session with a linked task (its task pane has a past too),
        # else the most recently active one; the viewport only, as an operator sees it.
        page.goto(f"{project}/sessions/?sort=-updated")
        with_task = page.locator("tr:has(a.task-state) a[href^='/sessions/']")
        link = with_task.first if with_task.count() else page.locator("a[href^='/sessions/']").first
        session_url = base + (link.get_attribute("href") or "")
        shoot(page, session_url, out / "session-live.png", full_page=False)
        head = page.locator("#session-header").first
        head_seq = int(head.get_attribute("data-head-seq") or "0") if head.count() else 0
        past = max(1, head_seq // 3)
        separator = "&" if "?" in session_url else "?"
        shoot(
            page,
            f"{session_url}{separator}at={past}",
            out / f"session-at-seq-{past}.png",
            full_page=False,
        )
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
