"""CORECODE (Shi et al. 2024): the construction steps of docs/method.md section 3."""
