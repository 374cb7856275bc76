"""CICERO construction steps (docs/method.md section 1)."""
