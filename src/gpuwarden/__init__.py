"""gpuwarden: the toolkit for people who run GPUs for machine learning.

Importing this package imports nothing heavy: commands and optional integrations load lazily.
"""

from __future__ import annotations

from gpuwarden.errors import GpuwardenError

__version__ = "0.1.0"
__all__ = ["GpuwardenError", "__version__"]
