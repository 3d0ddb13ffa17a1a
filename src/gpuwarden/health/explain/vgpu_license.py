"""An NVIDIA vGPU (or GRID / vCS / vWS guest) without a license.

A vGPU guest driver — and the same driver on a licensed physical GPU (Azure NV, AWS g6f/gr6f
fractional GPUs) — asks a license server (the NVIDIA License System's CLS or DLS, through the
client configuration token, or a legacy license server named in gridd.conf) for a license
through the nvidia-gridd service (Linux) or NVDisplay.Container (Windows). Until it holds one,
`nvidia-smi -q` shows "License Status : Unlicensed" (later releases: "Unlicensed (Restricted)"),
and after the grace period the driver restricts the GPU: frame rate capped and, for compute, CUDA
and memory allocation throttled or disabled (the vGPU Client Licensing User Guide, "How NVIDIA
vGPU Software Licensing Is Enforced"). Jobs then crawl after some minutes or fail to create a
context while nvidia-smi looks healthy. nvidia-gridd logs why it got none ("Failed to acquire
license from …", "Failed to register client").

The grace period is not the restriction: a guest that has not (yet) obtained a license runs
unrestricted for a while (nvidia-smi: "Unlicensed (Unrestricted)"; NVML's
NVML_GRID_LICENSE_STATE_UNLICENSED_UNRESTRICTED) and only then turns "Unlicensed (Restricted)". A
paste in that state shows licensing not done, not yet the cause of a slowdown or a failure: one
candidate, and a later License Status decides.

Not this: gridd's own start-up notes with nothing failing, "Licensing not supported for GPUs in
the system" (a guest driver installed where no licensable vGPU is — the wrong driver package),
the vGPU Manager listing its vGPU types with their license editions, or "Licensed".
"""

from __future__ import annotations

import re

from gpuwarden.health.explain.match import first_tier, reading_vote
from gpuwarden.health.explain.votes import Vote

CAUSE = "vgpu-unlicensed"
# A paste mentions one (lower case) before the patterns are tried.
WORDS = ("unlicensed", "acquire license", "license acquisition")

STATED = 0.9  # rank.py: ≥ 0.85 high — nvidia-smi's or gridd's own words
GRACE = 0.4  # rank.py: < 0.55 low — unlicensed but not restricted yet

# nvidia-smi -q's License Status (any release's wording), a person quoting it, and nvidia-gridd's
# failure (its syslog prefix is stripped from the flat text, so the words alone).
_STATED = re.compile(
    r"License Status\s*:?\s*(?:is\s+|was\s+)?(?:set to\s+)?Unlicensed\b(?!\s*\(Unrestricted\))|"
    r"\bUnlicensed \(Restricted\)|"
    r"(?:into|in) an? Unlicensed state|"
    r"\bFailed to acquire license\b|\bLicense acquisition failed\b",
    re.IGNORECASE,
)

# The grace period (nvidia-smi's state, the vGPU Manager's log of it).
_GRACE = re.compile(
    # "\s*(?::\s*)?", not "\s*:?\s*": one way through a long run of blanks, not n
    r"(?:License Status|license state)\s*(?::\s*)?Unlicensed \(Unrestricted\)",
    re.IGNORECASE,
)
GRACE_DECIDES = (
    "`nvidia-smi -q | grep -A2 -i license` again after some minutes: Unlicensed (Restricted) = "
    "this; Licensed = not this; `journalctl -u nvidia-gridd` (why acquisition has not succeeded)"
)

_MEANINGS = {
    STATED: "the vGPU / GRID guest holds no license: after the grace period the driver restricts "
    "the GPU (throttled or disabled CUDA, capped frame rate)",
    GRACE: "the vGPU guest holds no license yet but is in its grace period: the GPU is not "
    "restricted (yet), so this explains a slowdown or failure only once it turns Restricted",
}
DECIDES = (
    "`nvidia-smi -q | grep -A2 -i license` (License Status Licensed, with an expiry) and "
    "`journalctl -u nvidia-gridd` (why acquisition failed: server unreachable, token, "
    "trusted store); the client configuration token in /etc/nvidia/ClientConfigToken"
)


def vgpu_license_votes(flat: str) -> list[Vote]:
    """The vote for ``vgpu-unlicensed`` in a flattened paste (at most one)."""
    stated = first_tier(flat, ((_STATED, STATED),))
    if stated is not None:
        return reading_vote(CAUSE, stated, _MEANINGS, DECIDES)
    return reading_vote(CAUSE, first_tier(flat, ((_GRACE, GRACE),)), _MEANINGS, GRACE_DECIDES)
