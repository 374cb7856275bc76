"""CoreQuisite (PaCo): preconditions of commonsense facts (SEEDS.md section 2)."""
