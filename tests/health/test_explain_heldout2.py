"""explain_text on the second held-out set (tests/data/explain/heldout2.jsonl, SOURCES.md):
real error texts of kinds the first set is thin on — JAX/XLA, cuBLAS/cuDNN status errors, NGC
container banners, CDI, Kubernetes device plugin, NCCL remote/IB errors and watchdog timeouts
of newer PyTorch, Ray, Slurm, TensorRT — and texts whose cause is outside explain's vocabulary
(label ``unknown``), which must never get a confident (high) cause."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwarden.health.explain import BY_CODE, explain_text
from gpuwarden.health.explain.arch_cuda import arch_cuda_votes
from gpuwarden.types.health import Confidence
from tests.health.explain_sets import (
    DATA,
    UNKNOWN,
    assert_misses_are_unsure,
    labelled,
    load_set,
    source_urls,
    standard_checks,
    top_cause,
)

# Measured on the labelled (non-unknown) texts: 30/48 = 62.5 % before any change, 40/48 =
# 83.3 % after the general fixes listed in tests/data/explain/SOURCES.md.
# h64b relabelled 3 invalid device ordinals (high) and a CUDA_VISIBLE_DEVICES that hid the GPU
# (medium) unknown → device-ordinal-invalid / visible-devices-hide-all: 44/52.
MIN_ACCURACY = 0.83
# The texts whose top diagnosis is not the thread's cause, and why the text cannot give it.
KNOWN_MISSES = {
    "oom-xla-14gb-600aa-colabfold-65": "an XLA request with no device total: too big or the "
    "preallocated pool — the GPU's size decides",
    "oom-xla-allocating-20gb-llnerf-9": "same: 20 GB requested, the GPU's size is not in the text",
    "oom-tf-cublas-not-init-low-free-tf-9489": "a TF device log with low freeMemory and no error "
    "line: nothing votes",
    "oom-fragmentation-max-split-litgpt-303": "both readings hold: 8.65 GiB cached covers the "
    "request, and allocated + tried is at the GPU's limit",
    "ver-cublas-exec-tf114-cuda9-sensaturban-25": "the GPU (an RTX 30) is not named in the text",
    "ctr-nodevice-apollo-docker-no-runtime-3637": "no device in a container: missing "
    "capabilities or no runtime — the docker command is not in the text",
    "nccl-remote-error-was-ib-nodes-nccl-2076": "a remote error with a reset socket; the IB fault "
    "was found later on the nodes",
    "nccl-remote-error-socket-ifname-nccl-1141": "the title only; the fix (NCCL_SOCKET_IFNAME) "
    "is in a later comment",
}


HELDOUT2 = load_set("heldout2")
LABELLED = labelled(HELDOUT2)


def test_the_set_is_big_varied_and_new(fixtures: Path) -> None:
    assert len(HELDOUT2) >= 50
    assert {cause for _, cause in HELDOUT2} <= set(BY_CODE) | {UNKNOWN}
    assert len({cause for _, cause in LABELLED}) >= 15
    # 7 since h64b relabelled three invalid device ordinals and a CUDA_VISIBLE_DEVICES that hid
    # the GPU (SOURCES.md, set 2)
    assert sum(cause == UNKNOWN for _, cause in HELDOUT2) >= 7
    urls = [e["source_url"] for e, _ in HELDOUT2]
    assert all(url.startswith("https://github.com/") for url in urls)
    used_before = source_urls(DATA / "heldout.jsonl", fixtures / "errors" / "examples.jsonl")
    assert not used_before & set(urls)
    assert set(KNOWN_MISSES) <= {e["id"] for e, _ in LABELLED}


(
    test_accuracy_floor_and_exactly_the_known_misses,
    test_labelled_text_gets_its_cause_first,
    test_a_cause_outside_the_vocabulary_gets_no_confident_answer,
) = standard_checks(
    HELDOUT2,
    known_misses=KNOWN_MISSES,
    min_accuracy=MIN_ACCURACY,
)


def test_a_miss_is_never_confident_and_says_what_decides() -> None:
    assert_misses_are_unsure(LABELLED, KNOWN_MISSES)


def _text(example_id: str) -> str:
    return next(e["error_text"] for e, _ in HELDOUT2 if e["id"] == example_id)


def test_ngc_banners_name_the_container_start_not_the_driver() -> None:
    no_driver = explain_text(_text("ctr-ngc-no-driver-detected-seldon-4887")).diagnoses
    assert no_driver[0].cause == "container-runtime-not-nvidia"
    assert no_driver[0].confidence is Confidence.HIGH
    assert "driver-too-old" not in {d.cause for d in no_driver[:1]}
    old_host = explain_text(_text("ver-ngc-container-driver-470-sagemaker-dlc-4990")).diagnoses
    assert [(d.cause, d.confidence) for d in old_host] == [("driver-too-old", Confidence.HIGH)]


def test_error_35_after_a_docker_run_without_gpus() -> None:
    top = explain_text(_text("ctr-error35-docker-without-gpus-ft-backend-111")).diagnoses[0]
    assert top.cause == "container-runtime-not-nvidia"
    assert top.confidence is not Confidence.HIGH
    assert "--gpus" in (top.decides or "")
    # the same error after `docker run --gpus all` stays the driver's
    with_gpus = (
        "docker run --gpus all img\nCUDA driver version is insufficient for CUDA runtime version"
    )
    assert top_cause(with_gpus) == "driver-too-old"


def test_the_gpu_named_against_the_cuda_named() -> None:
    top = explain_text(_text("ver-cublas-exec-rtx3080-cuda10-sparseconvnet-208")).diagnoses[0]
    assert top.cause == "gpu-arch-unsupported"
    assert any("sm_86" in e and "11.1" in e and "10.0" in e for e in top.evidence)
    assert arch_cuda_votes("RTX 3080, torch 1.12.1+cu113, CUBLAS_STATUS_EXECUTION_FAILED") == []
    assert arch_cuda_votes("A100 and CUDA 10.2 but also CUDA 11.8 tried") == []
    [vote] = arch_cuda_votes("H100 80GB HBM3 with torch 1.13.1+cu117: no kernel image")
    assert "11.8" in vote.evidence and "11.7" in vote.evidence


def test_remote_error_is_ranked_not_asserted() -> None:
    diagnoses = explain_text(_text("nccl-remote-error-socket-ifname-nccl-1141")).diagnoses
    assert {d.cause for d in diagnoses} == {
        "nccl-remote-rank-died",
        "nccl-ib-transport",
        "nccl-socket-interface",
    }
    assert all(d.confidence is Confidence.LOW and d.decides for d in diagnoses)
    # the "Last error" NCCL attaches decides it
    assert top_cause(_text("nccl-remote-error-last-ib-completion-deepep-106")) == (
        "nccl-ib-transport"
    )


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "RTX 3080",
                "GeForce RTX 4090",
                "A100",
                "H100",
                "GTX 1080",
                "CUDA 10.0",
                "cu118",
                "cudatoolkit 11.1",
                "CUDA Version: 12.2",
                "cuda=9.2",
                " ",
                ",",
                "Ti",
                "\n",
                "é",
            ]
        )
        | st.text(max_size=12),
        max_size=12,
    )
)
def test_arch_cuda_reader_never_raises_and_votes_only_with_both(parts: list[str]) -> None:
    text = " ".join(parts)
    votes = arch_cuda_votes(text)
    assert all(v.cause == "gpu-arch-unsupported" and v.weight < 0.85 for v in votes)
    if votes:
        assert "cu" in text.lower()
    explain_text(text)  # the whole pipeline on the same text: no exception
