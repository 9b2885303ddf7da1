"""The package version, in a leaf module so that any module can read it without importing
the package root (pyproject.toml holds the same number)."""

__version__ = "0.1.0"
