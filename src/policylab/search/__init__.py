"""Black-box policy search (papers/seed_control_theory.md §0.5): antithetic ES (`es`),
linear bandits (`linear_bandit`) and RepES, bandits over policy representations (`reprl`)."""
