"""An item's correct answers as written: shared by the generators and by AF (which reads no parser)."""

from __future__ import annotations

import pandas as pd


def written_answers(view: pd.DataFrame) -> list[list[str]]:
    """Every correct answer of each instance as written: the gold first, then the published choices marked
    correct (a CICERO v2 item has two to four)."""
    if "choices" not in view.columns or "correct_answers" not in view.columns:
        return [[str(g).strip()] for g in view["gold"]]
    out = []
    for g, ch, cor in zip(view["gold"], view["choices"], view["correct_answers"]):
        written = [str(g).strip()]
        if ch is not None and cor is not None:
            written += [str(ch[int(k)]).strip() for k in cor if 0 <= int(k) < len(ch)]
        out.append([t for t in dict.fromkeys(written) if t])
    return out


def chinese_ids(view: pd.DataFrame) -> set[str]:
    """The instances written in Chinese (`language` "zh"): the English parser's rules and checks pass them by."""
    return set(view["id"][view["language"] == "zh"]) if "language" in view.columns else set()
