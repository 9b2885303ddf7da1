"""Trainers: each one loop, read top to bottom (sft.py now; llm.py and control.py next)."""
