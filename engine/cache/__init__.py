"""Answers that need no model call: the on-disk cache (disk; its keys and value format: entries; the database
file itself: db) and type-through over the variants of recent generations (typethrough)."""
