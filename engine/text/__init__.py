"""Text around the model: post-processing of what it wrote (postprocess), the budgets and mode at a
cursor (budget), where a statement is complete (statements), and the order of variants (rank)."""
