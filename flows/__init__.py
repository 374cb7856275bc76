"""Prefect flows: each reads as the list of construction steps it runs."""
