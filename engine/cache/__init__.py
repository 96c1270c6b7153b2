"""Answers that need no model call: the on-disk cache (disk, and its database file seen from outside: db)
and type-through over the variants of recent generations (typethrough)."""
