"""The completion service: one keystroke's path from a state to an answer. service (the facade),
planner (pure: states and timing), store (answers that exist without a model call), worker, jobs and
runner (the scheduler and running one job on a backend), items (raw text -> suggestions), explicit,
refresh, race, pause. Never imports pygls or lsprotocol."""
