"""Figures are drawn headless in these tests (tests/conftest.py puts the package on sys.path)."""

import matplotlib

matplotlib.use("Agg")
