"""CoreQuisite (PaCo): preconditions of commonsense facts (docs/method.md section 2)."""
