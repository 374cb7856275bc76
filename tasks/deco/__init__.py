"""DECO / ACCENT (Ghazarian et al. 2023): SEEDS.md section 4."""
