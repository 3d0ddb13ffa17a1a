"""PyTorch-profiler (Kineto) trace analysis: load columnar, analyse with pure functions."""
