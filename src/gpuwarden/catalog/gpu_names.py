"""Matching what people type, and what nvidia-smi prints, to one catalog GPU.

Exact forms (key, display name, nvidia-smi name) match after dropping case and punctuation. Loose
forms are matched by words: every word of the row's family must be typed ("RTX 4090", not "4090";
"L40" never means "L40S"), and every typed word must describe the row ("80GB", "SXM", "PCIe").
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpuwarden.errors import AmbiguousNameError, UnknownNameError

if TYPE_CHECKING:  # names only: the trace path reads GPU names without the catalog's types
    from gpuwarden.types.hardware import GpuSpec

# Words that carry no identity: vendor and brand prefixes nvidia-smi adds or drops by driver age.
_FILLER = frozenset({"nvidia", "tesla", "geforce", "gpu"})
_FORM_FACTORS = frozenset({"sxm", "sxm2", "sxm4", "sxm5", "pcie", "nvl", "hgx", "superchip"})
# Server modules: the default form factor when none is typed.
_MODULE = frozenset({"sxm", "hgx", "superchip"})
_WORD = re.compile(r"[a-z0-9]+")
# A Grace superchip's GPU (GH200, GB200, GB300): its CPU reached over NVLink-C2C, its NVLink
# domain a rack's (NVL32, NVL72) — by name, for the GPUs the catalog's rows do not spell
SUPERCHIP_NAME = re.compile(r"\bG[HB]\d{3}\b", re.IGNORECASE)


def compact(text: str) -> str:
    """Lower case, letters and digits only: the form exact names are compared in."""
    return "".join(_WORD.findall(text.lower()))


def words(text: str) -> frozenset[str]:
    """Lower-case words, "80 GB" joined to "80gb", "sxm5" also read as "sxm", fillers dropped."""
    raw = _WORD.findall(text.lower())
    out: set[str] = set()
    for index, word in enumerate(raw):
        if word == "gb" and index and raw[index - 1].isdigit():
            out.discard(raw[index - 1])
            out.add(f"{raw[index - 1]}gb")
            continue
        out.add(word)
        if re.fullmatch(r"sxm\d", word):
            out.add("sxm")
    return frozenset(out - _FILLER)


def _own_words(gpu: GpuSpec) -> frozenset[str]:
    """The words of the catalog's own names for the row (key, name, family, variant)."""
    return frozenset().union(*(words(t) for t in (gpu.key, gpu.name, gpu.family, gpu.variant)))


def _row_words(gpu: GpuSpec) -> frozenset[str]:
    return _own_words(gpu).union(*(words(t) for t in gpu.smi_names))


def _exact(query: str, gpus: Sequence[GpuSpec]) -> GpuSpec | None:
    wanted = compact(query)
    for gpu in gpus:
        if wanted in {compact(t) for t in (gpu.key, gpu.name, *gpu.smi_names)}:
            return gpu
    return None


def _candidates(query: frozenset[str], gpus: Sequence[GpuSpec]) -> list[GpuSpec]:
    return [g for g in gpus if words(g.family) <= query <= _row_words(g)]


def _ambiguous(name: str, matches: Sequence[GpuSpec]) -> AmbiguousNameError:
    return AmbiguousNameError(
        "gpu",
        name,
        [g.key for g in matches],
        descriptions=[f"{g.key} ({g.name})" for g in matches],
        hint="name the memory size or form factor, e.g. "
        + " or ".join(repr(g.name) for g in matches[:2]),
    )


def _suggestions(name: str, gpus: Sequence[GpuSpec]) -> list[str]:
    """Rows sharing the most family words ("4090" → rtx-4090-24gb), then spelling neighbours."""
    query, typed = words(name), name.strip().lower()

    def score(gpu: GpuSpec) -> tuple[int, float]:
        texts = (gpu.key, gpu.name.lower(), gpu.family.lower())
        similarity = max(difflib.SequenceMatcher(None, typed, t).ratio() for t in texts)
        return len(query & words(gpu.family)), similarity

    scored = sorted(((score(g), g.key) for g in gpus), reverse=True)
    return [key for (shared, similarity), key in scored if shared or similarity >= 0.6][:4]


def match_gpu(name: str, gpus: Sequence[GpuSpec]) -> GpuSpec:
    """The one GPU ``name`` means (rules in the module docstring and ``resolve_gpu``)."""
    if exact := _exact(name, gpus):
        return exact
    query = words(name)
    matches = _candidates(query, gpus) if query else []
    if len(matches) > 1 and not query & _FORM_FACTORS:
        modules = [g for g in matches if words(g.variant) & _MODULE]
        matches = modules or matches
    if len(matches) > 1:
        # a word only another row's nvidia-smi name shares ("RTX PRO 6000 Workstation": the
        # Max-Q's smi name says "Max-Q Workstation Edition") loses to the row it names
        named = [g for g in matches if query <= _own_words(g)]
        matches = named or matches
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise _ambiguous(name, matches)
    raise UnknownNameError("gpu", name, _suggestions(name, gpus))
