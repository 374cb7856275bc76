"""What a stage's key holds of the code (issue 72, item 3): the judge depends on AF's discriminator code, not on
AF's stage module; an attribute docstring is prose, not code."""

from __future__ import annotations

import pytest

from csk import codehash
from csk.pipeline import discover


def _hashes() -> dict[str, str]:
    return {f"{p.name}/{s.name}": s.code_hash() for p in discover().values() for s in p.stages}


@pytest.fixture
def edit_module(tmp_path, monkeypatch):
    """edit(module, new source): the stage keys computed with that module's source replaced."""
    real = codehash.module_file

    def edit(module: str, source: str) -> dict[str, str]:
        path = tmp_path / (module.replace(".", "_") + ".py")
        path.write_text(source)
        codehash.forget()
        monkeypatch.setattr(codehash, "module_file", lambda name: path if name == module else real(name))
        try:
            return _hashes()
        finally:
            monkeypatch.setattr(codehash, "module_file", real)
            codehash.forget()

    yield edit
    codehash.forget()


def test_an_edit_of_af_stage_module_does_not_rekey_the_judge(edit_module):
    """`distractor_quality` imports AF's discriminators (`tasks.distractors.discriminators`), never AF's stage
    module: a helper added to adversarial.py re-keys `adversarial_filter` and leaves `distractor_quality`'s key;
    an edit of the discriminators' code re-keys both."""
    assert "tasks.distractors.adversarial" not in codehash.closure(("tasks.distractors.quality",))[0]
    before = _hashes()
    judges = [k for k in before if k.endswith("/distractor_quality")]
    assert judges and [k for k in before if k.endswith("/adversarial_filter")]
    af = codehash.module_file("tasks.distractors.adversarial").read_text()
    after = edit_module("tasks.distractors.adversarial", af + "\n\ndef _a_new_helper():\n    return 1\n")
    assert all(after[k] == before[k] for k in judges)
    assert all(after[k] != before[k] for k in before if k.endswith("/adversarial_filter"))
    disc = codehash.module_file("tasks.distractors.discriminators").read_text()
    after = edit_module("tasks.distractors.discriminators", disc + "\n\ndef _a_new_helper():\n    return 1\n")
    assert all(after[k] != before[k] for k in judges + [k for k in before if k.endswith("/adversarial_filter")])


def test_an_attribute_docstring_edit_rekeys_nothing(edit_module):
    """A string statement right after an assignment (ServerSpec's fields' docs) is prose: rewording one keeps every
    stage's key; the assignment it documents is code."""
    from csk.codehash import canonical_source

    base = b'class Spec:\n    """Doc."""\n\n    size: int = 4\n    """how many"""\n    rate = 0.5\n    """how fast"""\n'
    assert canonical_source(base) == canonical_source(base.replace(b"how many", b"how many, reworded")
                                                      .replace(b"how fast", b"the rate"))
    assert canonical_source(base) != canonical_source(base.replace(b"= 4", b"= 5"))
    module = b'LIMIT = 3\n"""the most"""\n\n\ndef f():\n    x = 1\n    """x: one"""\n    return x\n'
    assert canonical_source(module) == canonical_source(module.replace(b"the most", b"at most").replace(b"one", b"1"))
    assert canonical_source(b'def f():\n    g()\n    "a string after a call"\n') != \
        canonical_source(b'def f():\n    g()\n    "another"\n')  # only after an assignment

    before = _hashes()
    served = codehash.module_file("tasks.distractors.served").read_text()
    assert '    """requests in flight at once"""' in served
    reworded = served.replace('    """requests in flight at once"""', '    """how many requests are in flight together"""')
    assert edit_module("tasks.distractors.served", reworded) == before
    changed = edit_module("tasks.distractors.served", served.replace("concurrency: int = 4", "concurrency: int = 5"))
    assert changed != before
