"""CICERO construction steps (SEEDS.md section 1)."""
