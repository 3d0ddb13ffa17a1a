"""Review r25b: a bare CUDA error number whose meaning came with a later CUDA release (34,
cudaErrorStubLibrary since CUDA 11.1; cudaErrorNotReady in CUDA ≤ 10.0) is not read so in a
paste that names only older CUDA releases."""

from __future__ import annotations

from gpuwarden.health.explain import explain_text


def _causes(text: str) -> list[str]:
    return [d.cause for d in explain_text(text).diagnoses]


def test_error_34_of_a_cuda_9_program_is_not_read_as_a_stub_library() -> None:
    # cudaStreamQuery's "not ready" (34 in CUDA ≤ 10.0) wrapped in an error check
    text = "CUDA 9.0, cuDNN 7\ncudaStreamQuery(stream) failed: CUDA error 34 at kernel.cu:88"
    assert "library-conflict" not in _causes(text)


def test_error_34_with_a_cuda_11_or_later_release_named_keeps_the_stub_reading() -> None:
    text = "built with CUDA 12.1\ncuInit failed: CUDA error 34 at init.cpp:12"
    assert _causes(text)[0] == "library-conflict"


def test_error_34_with_no_release_named_keeps_the_stub_reading() -> None:
    assert _causes("cuInit failed: CUDA error 34 at init.cpp:12")[0] == "library-conflict"


def test_the_stub_librarys_name_is_read_whatever_release_is_named() -> None:
    text = "CUDA 9.0\nCUDA error 34: CUDA driver is a stub library"
    assert _causes(text)[0] == "library-conflict"
