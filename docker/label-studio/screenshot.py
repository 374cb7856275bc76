"""A screenshot of one task's labeling screen as an annotator sees it (Label Studio's own UI, headless
Debian Chromium driven by Playwright; no browser is downloaded: `executable_path` is the system's).

    .venv-label-studio/bin/python docker/label-studio/screenshot.py URL EMAIL PASSWORD PROJECT TASK OUT.png [WAIT_TEXT]

Logs in through the login form, opens the task in the data manager's labeling panel (TASK 0: the label
stream an annotator opens with "Label All Tasks"; TASK -1: the data manager's table), waits for WAIT_TEXT
(a phrase of the task: the dialogue has rendered) and writes the PNG."""

from __future__ import annotations

import sys

from browser import logged_in  # this folder's: the scripts run as files, their folder on the path


def shoot(url: str, email: str, password: str, project: int, task: int, out: str, wait_text: str | None = None) -> None:
    with logged_in(url, email, password) as page:
        # task 0: the label stream ("Label All Tasks"), the screen an annotator works in
        # task -1: the data manager's table of tasks (its columns as a project manager sees them)
        page.goto(f"{url}/projects/{project}/data" if task < 0 else f"{url}/projects/{project}/data?labeling=1"
                  if not task else f"{url}/projects/{project}/data?task={task}")
        if wait_text:
            page.wait_for_selector(f"text={wait_text}", timeout=90000)
        else:
            page.wait_for_selector(".lsf-main-view, [class*=main-view]", timeout=90000)
        page.wait_for_timeout(1500)
        # the project's instructions open over the first task: read, then closed, as an annotator does
        page.keyboard.press("Escape")
        for close in page.locator("[aria-label=Close], .ant-modal-close, button:has-text('×')").all()[:2]:
            try:
                close.click(timeout=1000)
            except Exception:  # already gone
                pass
        page.wait_for_timeout(1000)
        page.screenshot(path=out)


if __name__ == "__main__":
    a = sys.argv[1:]
    shoot(a[0], a[1], a[2], int(a[3]), int(a[4]), a[5], a[6] if len(a) > 6 else None)
