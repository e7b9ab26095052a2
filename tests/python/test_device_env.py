"""The framework layers' device-statistics settings (msprobe/core/devstats.py): each bad value gets
one warning naming the variable and its value, and the default; good values take effect."""

from recorder_testutil import run_child

CODE = """
from msprobe.core.devstats import DeviceStats
d = DeviceStats()
print("RESULT", d.enabled, d.min_bytes, d.batch, d.pending_max)
"""


def settings(env: dict) -> tuple[list[str], str]:
    p = run_child(CODE, {"MSPROBE_DEVICE_STATS": "", "MSPROBE_DEVICE_STATS_MIN_BYTES": "", **env})
    assert p.returncode == 0, p.stderr[-2000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert len(line) == 1, p.stdout
    return line[0].split()[1:], p.stdout + p.stderr


def test_defaults_and_good_values():
    assert settings({})[0] == ["True", "1048576", "256", "16384"]  # the hybrid at 1 MiB
    assert settings({"MSPROBE_DEVICE_STATS_MIN_BYTES": "4096"})[0][:2] == ["True", "4096"]
    assert settings({"MSPROBE_DEVICE_STATS": "1", "MSPROBE_DEVICE_STATS_MIN_BYTES": "4096"})[0][:2] == ["True", "0"]
    assert settings({"MSPROBE_DEVICE_STATS": "0"})[0][0] == "False"


def test_bad_values_warn_once_each_and_fall_back():
    bad = {
        "MSPROBE_DEVICE_STATS": "yes",
        "MSPROBE_DEVICE_STATS_MIN_BYTES": "1MB",
        "MSPROBE_DEVICE_BATCH": "0",
        "MSPROBE_DEVICE_PENDING_MAX": "-3",
    }
    got, log = settings(bad)
    assert got == ["True", "1048576", "256", "16384"], got
    for k, v in bad.items():
        assert log.count(f"{k}={v!r}") == 1, (k, log)
