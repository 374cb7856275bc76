"""Submit one annotation through Label Studio's own labeling page, as an annotator does: headless Debian
Chromium driven by Playwright (no browser is downloaded: `executable_path` is the system's).

    .venv-label-studio/bin/python docker/label-studio/annotate.py URL EMAIL PASSWORD PROJECT TASK ACTIONS.json

Logs in through the login form, opens the task in the data manager's labeling panel, performs the actions
(a JSON list, in order) and presses Submit. Actions name the controls of the step's config:
  {"textarea": "answer", "text": "..."}    type into the TextArea named `answer` and add the text (Enter)
  {"choice": "valid"}                      tick the choice whose value is `valid`
  {"rating": "event_cs", "value": 4}       give the Rating named `event_cs` 4 stars
Exits non-zero, naming the action, when a control is not on the page (a renamed control fails here)."""

from __future__ import annotations

import json
import sys

from browser import logged_in  # this folder's: the scripts run as files, their folder on the path


def annotate(url: str, email: str, password: str, project: int, task: int, actions: list[dict]) -> None:
    with logged_in(url, email, password) as page:
        page.goto(f"{url}/projects/{project}/data?task={task}")
        page.wait_for_selector("button:has-text('Submit')", timeout=120000)
        page.keyboard.press("Escape")  # the instructions open over the first task
        for close in page.locator("[aria-label=Close], .ant-modal-close").all()[:2]:
            try:
                close.click(timeout=1000)
            except Exception:  # already gone
                pass
        for action in actions:
            if "textarea" in action:
                box = page.locator(f"textarea[name='{action['textarea']}']").first
                box.wait_for(timeout=30000)
                box.fill(action["text"])
                box.press("Enter")
            elif "choice" in action:
                page.locator(f"label:has-text('{action['choice']}')").first.click(timeout=30000)
            elif "rating" in action:
                stars = page.locator(f"[data-testid='{action['rating']}'] .ant-rate-star, "
                                     f".lsf-rating:has([name='{action['rating']}']) .ant-rate-star")
                if not stars.count():  # one Rating per block, in config order: the block titled by its name
                    stars = page.locator(".ant-rate").nth(int(action.get("index", 0))).locator(".ant-rate-star")
                stars.nth(int(action["value"]) - 1).click(timeout=30000)
            else:
                raise SystemExit(f"unknown action {action!r}")
        with page.expect_response(lambda r: "/annotations" in r.url and r.request.method == "POST", timeout=60000) as r:
            page.click("button:has-text('Submit')")
        if r.value.status >= 400:
            raise SystemExit(f"Label Studio refused the annotation: {r.value.status} {r.value.text()[:300]}")


if __name__ == "__main__":
    a = sys.argv[1:]
    annotate(a[0], a[1], a[2], int(a[3]), int(a[4]), json.loads(open(a[5]).read()))
