"""Policy: what to generate for a cursor and when, as plain data (planner.py). No threads, no model."""
