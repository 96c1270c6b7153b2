"""Text around the model: post-processing of what it wrote (postprocess; the steps that compare it with the
code around the cursor: overlap), the budgets and mode at a cursor (budget), where a statement is complete
(statements), the order of variants (rank), and the text a prompt window shows (window)."""
