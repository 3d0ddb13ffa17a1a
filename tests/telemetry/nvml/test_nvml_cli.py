"""`gpuwarden snapshot --backend nvml` end to end, with the fake NVML as the process's pynvml."""

from __future__ import annotations

import json

from gpuwarden.cli.main import main
from tests.fakes.fake_pynvml import installed
from tests.fakes.fake_pynvml.captures import A100_MIG_XML, H100


def test_snapshot_json_over_fake_nvml(fake_host, capsys):
    host = fake_host(H100, A100_MIG_XML)
    with installed(host.module):
        code = main(["snapshot", "--backend", "nvml", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] == "nvml" and doc["simulated"] is False
    h100, a100 = doc["devices"]
    assert h100["name"] == "NVIDIA H100 80GB HBM3"
    assert h100["power_draw_watts"] == 631.95  # query-gpu CSV: power.draw 631.95 W
    assert a100["mig_mode"] is True
    assert [m["gpu_instance_id"] for m in a100["mig_devices"]] == [1, 2]
