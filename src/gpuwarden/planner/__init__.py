"""Capacity planning: per-GPU memory of training, fine-tuning and inference. Pure functions."""
