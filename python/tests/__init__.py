"""Tests of the ncert_dump package (run: python3 -m unittest discover -s python/tests -t python)."""
