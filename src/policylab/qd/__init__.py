"""Quality diversity (papers/seed_control_theory.md §0.5, §9): a grid archive with CMA-MAE
thresholds (`archive`), its metrics (`metrics`), and the DQD branching rule (`dqd`)."""
