"""The completion service: one keystroke's path from a state to an answer. service (the facade), planner
(pure: states, plans, timing), jobs (the unit of work), store (every answer, and the one channel from the
schedulers to the requests), hooks (how a scheduler writes into it), worker / jobqueue / runner (the
scheduler and its engine thread), events (the one way up), items (raw text -> suggestions), explicit,
followups, refresh, race, pause. Never imports pygls or lsprotocol."""
