"""Our dumps of msprobe's own sample drivers against msprobe 1.1.1's sample dumps.

The drivers in drivers/ are unchanged copies of samples/drivers/ (same models, seeds, steps);
each runs in a fresh process (forked from one that imported torch, see forkrun.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cases import CASES, out_dir, run_all
from golden import SAMPLES, compare_dump, load

# md5 case -> its tensor-mode twin (same driver and seeds), whose .pt files show the bits.
TWINS = {
    "mlp_L0_md5": "mlp_L0_tensor",
    "mlp_L1_md5": "mlp_L1_tensor",
    "mlp_mix_md5": "mlp_mix_tensor",
    "edge_L1_md5": "edge_L1_tensor",
}
# Cases where we differ on purpose (README "PyTorch layer"); pinned by their own tests below.
# (config_variants/mix_list was one until the recorder followed 1.1.1's MixRangeScope: a list
# entry naming a module dumps everything inside that module's span.)
PINNED: set[str] = set()


@pytest.fixture(scope="session")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    res = run_all(root, list(CASES))
    logs = {f: Path(f).read_text()[-2000:] for f in res["failed"]}
    assert not res["failed"], logs
    return root


def _steps(case: str) -> list[str]:
    return sorted(p.name for p in (SAMPLES / case).iterdir() if p.name.startswith("step"))


def _leaf(dump: dict, path: tuple) -> dict:
    v = dump["data"]
    for k in path:
        v = v[k]
    return v


def _crc_diffs_are_torch_numerics(root: Path, case: str, paths: list[tuple]) -> list[str]:
    """A CRC may differ only where torch 2.14 computed other bits than 2.15: the twin tensor
    dumps (ours and msprobe's) must hold different bytes for that very leaf."""
    twin = TWINS.get(case)
    if twin is None:
        return [f"CRC differs at {p} and there is no tensor twin" for p in paths]
    errs = []
    ours_dir = out_dir(root, twin) / "step0/rank"
    ref_dir = SAMPLES / twin / "step0/rank"
    o, r = load(ours_dir / "dump.json"), load(ref_dir / "dump.json")
    for p in paths:
        name = _leaf(r, p)["data_name"]
        assert _leaf(o, p)["data_name"] == name
        a = torch.load(ours_dir / "dump_tensor_data" / name, weights_only=True)
        b = torch.load(ref_dir / "dump_tensor_data" / name, weights_only=True)
        if torch.equal(a, b):
            errs.append(f"CRC differs at {p} although the tensor bits are equal")
    return errs


@pytest.mark.parametrize("case", [c for c in CASES if c not in PINNED])
def test_matches_msprobe_111(dumps: Path, case: str) -> None:
    numbers = CASES[case][2]
    for st in _steps(case):
        ours = out_dir(dumps, case) / st / "rank"
        assert ours.is_dir(), f"no {st} written"
        stack = case != "config_variants/dm_bwd_out"
        d = compare_dump(ours, SAMPLES / case / st / "rank", numbers=numbers, stack=stack)
        errs = d.errs + _crc_diffs_are_torch_numerics(dumps, case, d.crc)
        assert not errs, "\n".join(errs[:20])
    # no step directory beyond msprobe's
    assert sorted(p.name for p in out_dir(dumps, case).iterdir()) == _steps(case)


def test_tensor_files_load_and_match_dump_json(dumps: Path) -> None:
    """Every data_name has its .pt; it loads with weights_only=True and has the leaf's dtype/shape."""
    for case in ("mlp_mix_tensor", "edge_L1_tensor", "kwargs_tensor"):
        rank = out_dir(dumps, case) / "step0/rank"
        files = set(p.name for p in (rank / "dump_tensor_data").iterdir())
        ref_files = set(p.name for p in (SAMPLES / case / "step0/rank/dump_tensor_data").iterdir())
        assert files == ref_files

        def leaves(v):
            if isinstance(v, dict):
                if "data_name" in v:
                    yield v
                else:
                    for x in v.values():
                        yield from leaves(x)
            elif isinstance(v, list):
                for x in v:
                    yield from leaves(x)

        for leaf in leaves(load(rank / "dump.json")["data"]):
            t = torch.load(rank / "dump_tensor_data" / leaf["data_name"], weights_only=True)
            assert str(t.dtype) == leaf["dtype"] and list(t.shape) == leaf["shape"]


def test_stack_frames_of_emptied_records_in_dm_bwd_out(dumps: Path) -> None:
    """With data_mode ["backward", "output"] msprobe writes stack.json entries for the forward
    records it drops from dump.json (empty); so do we (the writer keeps an emptied record's stack
    and construct entries). dump.json matches (test above)."""
    ours = load(out_dir(dumps, "config_variants/dm_bwd_out") / "step0/rank/stack.json")
    ref = load(SAMPLES / "config_variants/dm_bwd_out/step0/rank/stack.json")
    assert ref and all(n.endswith(".forward") for n in ref)
    assert list(ours) == list(ref)
    dump = load(out_dir(dumps, "config_variants/dm_bwd_out") / "step0/rank/dump.json")["data"]
    assert not set(ours) & set(dump)  # the records themselves are not written


def test_mix_list_dumps_every_record_inside_a_listed_module(dumps: Path) -> None:
    """1.1.1's MixRangeScope: a mix list entry naming a module (`fc2`) dumps every record inside
    that module's span too (its Functional.linear), not only the names containing the entry."""
    case = "config_variants/mix_list"
    ours = load(out_dir(dumps, case) / "step0/rank/dump.json")["data"]
    ref = load(SAMPLES / case / "step0/rank/dump.json")["data"]
    assert list(ours) == list(ref)
    assert any("fc2" not in n for n in ours)


# Seeded cases over every level, task and the value kinds of edge.py/f64.py, for the comparison
# of the two recording paths.
PATH_CASES = [
    "mlp_L1_md5",
    "mlp_L0_statistics",
    "mlp_mix_tensor",
    "edge_L1_md5",
    "edge_L1_tensor",
    "float64_inf_md5",
    "config_variants/dm_bwd_out",
    "config_variants/mdump",
]


def test_python_path_writes_the_same_files(dumps: Path, tmp_path: Path) -> None:
    """The native hot path (msprobe._fastpath, used for every case above) and the pure-Python
    path it falls back to (MSPROBE_FASTPATH=0, or the module not built) write identical files.
    Each side must have recorded through the path it stands for, or the comparison proves nothing."""
    from cases import LIB, encoder_of

    assert (LIB.parent / "lib_fastpath.so").is_file(), "msprobe._fastpath is not built (scripts/build.sh builds it)"
    res = run_all(tmp_path, PATH_CASES, env={"MSPROBE_FASTPATH": "0"})
    assert not res["failed"], res["failed"]
    for case in PATH_CASES:
        assert encoder_of(dumps, case) == "native", f"{case}: msprobe._fastpath did not load in the native run"
        assert encoder_of(tmp_path, case) == "python", f"{case}: MSPROBE_FASTPATH=0 still recorded natively"
    compared = 0
    for case in PATH_CASES:
        fast, slow = out_dir(dumps, case), out_dir(tmp_path, case)
        fast_files = sorted(p.relative_to(fast) for p in fast.rglob("*") if p.is_file())
        assert fast_files == sorted(p.relative_to(slow) for p in slow.rglob("*") if p.is_file()), case
        for rel in fast_files:
            # dump_data_dir holds the absolute dump path, which differs between the two runs.
            a = (fast / rel).read_bytes().replace(str(dumps).encode(), b"ROOT")
            b = (slow / rel).read_bytes().replace(str(tmp_path).encode(), b"ROOT")
            assert a == b, f"{case}: {rel} differs"
            compared += 1
    assert compared > 3 * len(PATH_CASES)
