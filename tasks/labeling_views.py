"""How a task looks in Label Studio: pieces of the labeling interfaces (Label Studio XML) and the dialogue as
an annotator sees it. Imported by the labeling steps (tasks/*/labeling.py), which the flows declare; no
stage imports it, so a styling edit here moves no stage key.
"""

from __future__ import annotations

from html import escape

# Pieces of the labeling interfaces (Label Studio XML): the dialogue as `dialogue_html` renders it, and a
# titled box showing one task field; the marked box (the target, the response) is yellow as its mark.
DIALOGUE = '  <HyperText name="dialogue" value="$dialogue_html"/>'
MARKED = "background:#fff7d6;padding:6px;margin:6px 0;border-left:4px solid #f0b400"
SHOWN = "background:#eef4ff;padding:6px;margin:6px 0"


def box(title: str, name: str, style: str = MARKED) -> str:
    """A titled box showing the task field `name`."""
    return (f'  <View style="{style}">\n    <Header value="{title}" size="6"/>\n'
            f'    <Text name="{name}" value="${name}"/>\n  </View>')


def dialogue_html(turns: list[str], highlight: int | None = None, speakers: list[str] | None = None) -> str:
    """The dialogue as turns, one a line with its speaker in bold, the target turn marked: Label Studio's
    HyperText shows it as is (the text is escaped: a turn cannot inject markup)."""
    lines = []
    for k, turn in enumerate(turns):
        speaker, sep, text = (str(turn).partition(": ") if speakers is None else (speakers[k], ": ", str(turn)))
        if not sep:
            speaker, text = "", str(turn)
        body = escape(text)
        if k == highlight:
            body = f'<mark style="background:#ffe08a;padding:0 2px"><b>{body}</b></mark>'
        who = f"<b>{escape(speaker)}:</b> " if speaker else ""
        lines.append(f'<p style="margin:4px 0">{who}{body}</p>')
    return "<div>" + "".join(lines) + "</div>"
