"""Project memory: the three layers in memory.md, their provenance, and the
distillation that keeps them."""
