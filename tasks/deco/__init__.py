"""DECO / ACCENT (Ghazarian et al. 2023): docs/method.md section 4."""
