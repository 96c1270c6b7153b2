"""Pure decisions with no model and no I/O: which backend answers (routing) and what to generate ahead
of the user (speculation)."""
