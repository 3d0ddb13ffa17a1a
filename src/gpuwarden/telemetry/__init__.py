"""Reading GPUs: the only layer that touches them (DESIGN.md, Layers)."""
