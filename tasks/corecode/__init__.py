"""CORECODE (Shi et al. 2024): the construction steps of SEEDS.md section 3."""
