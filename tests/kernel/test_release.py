"""What `csk export` does to a run's rows: local paths out, text untouched."""

from __future__ import annotations

import pandas as pd

from csk.release import _public_columns


def test_exported_columns_name_no_local_path_and_leave_text_alone():
    entries = {"sources": {"manifest": {
        "params": {"mutual": "/home/u/data/mutual", "dailydialog": "/home/u/data/dd/dialogues_text.txt"},
        "files": [{"param": "mutual", "path": "/home/u/data/mutual/dev/dev_1.txt", "sha256": "a" * 64},
                  {"param": "dailydialog", "path": "/home/u/data/dd/dialogues_text.txt", "sha256": "b" * 64}]}}}
    df = pd.DataFrame({
        "id": ["r1", "r2"],
        "source_file": ["/home/u/data/mutual/dev/dev_1.txt", "/home/u/data/dd/dialogues_text.txt"],
        "dialogue": [["/me waves hello", "hi"], ["A: fine"]],  # text that starts with "/" is text
        "evidence": [[{"text": "x", "source_file": "/home/u/data/dd/dialogues_text.txt"}], []]})
    out = _public_columns(df, entries)
    assert out["source_file"].tolist() == ["mutual/dev/dev_1.txt", "dialogues_text.txt"]
    assert out["source_sha256"].tolist() == ["a" * 64, "b" * 64]
    assert out["dialogue"].tolist() == [["/me waves hello", "hi"], ["A: fine"]]
    assert out["evidence"][0][0]["source_file"] == "dialogues_text.txt"
