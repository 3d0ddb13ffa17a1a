"""Verdicts over data: health rules over snapshots and windows, the kernel-log Xid scanner, and
the diagnosis of pasted errors. Pure functions: no clock, no network, no files, no printing."""
