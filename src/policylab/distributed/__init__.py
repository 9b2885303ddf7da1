"""Training across processes with torch.distributed (gloo on CPU, NCCL on GPU): data-parallel
learners (DDP) and the low-communication modes (DiLoCo, DiLoCoX; papers/seed_agents.md §A10)."""
