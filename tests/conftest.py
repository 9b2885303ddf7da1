"""Puts tests/ on sys.path (pytest's prepend import mode), so test modules in any folder
can import the shared helpers beside this file (run_testing.py)."""
