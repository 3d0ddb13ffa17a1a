"""Review r26d of prometheus ``_labels`` (one error for a metric that is no object of string
labels, whichever way it is not): a series' metric that is not an object, or one with a value
that is not a string, is refused as the answer's error; string values are shared between series
(sys.intern)."""

from __future__ import annotations

import json

import pytest

from gpuwarden.fleet.prometheus import AnswerError, Sample, parse_answer


def _vector(*metrics: object) -> bytes:
    result = [{"metric": m, "value": [1700000000, "1"]} for m in metrics]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


@pytest.mark.parametrize("metric", [["Hostname", "node-1"], "node-1", {"gpu": 0}, {"gpu": None}])
def test_a_metric_that_is_no_object_of_string_labels_is_refused(metric: object) -> None:
    with pytest.raises(AnswerError, match="a series' metric is not an object of string labels"):
        parse_answer(_vector(metric), "vector")


def test_string_labels_are_read_and_shared_between_series() -> None:
    answer = parse_answer(
        _vector({"Hostname": "node-1", "gpu": "0"}, {"Hostname": "node-1", "gpu": "1"}), "vector"
    )
    first, second = answer.result
    assert isinstance(first, Sample) and isinstance(second, Sample)
    assert (first.labels, second.labels) == (
        {"Hostname": "node-1", "gpu": "0"},
        {"Hostname": "node-1", "gpu": "1"},
    )
    assert first.labels["Hostname"] is second.labels["Hostname"]
