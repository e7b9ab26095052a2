#!/usr/bin/env bash
# Per-record capture cost of the MindSpore layer beside msprobe 1.1.1 (same driver, same machine, one
# run): PyNative on CPU, the sample model of msprobe-format.md §12 (tests/python/mindspore/drivers).
# msprobe 1.1.1 runs with the two workarounds of real-clients.md §2.1 (--shim --shim_norm) from
# target/msprobe-1.1.1 (scripts/setup-ms.sh --msprobe installs it).
# cost per record = (median s/step with dump - median s/step without dump, same launch mode) / records
# per step; the median over steps 2..STEPS (the first step builds the hooks and compiles).
# usage: bash scripts/bench_mindspore.sh [STEPS]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
bash scripts/setup-ms.sh --msprobe >&2
[ -f target/release/libmsprobe.so ] || cargo build -q --release -p msprobe >&2
PY=target/venv-ms/bin/python
DRIVER=tests/python/mindspore/drivers/ms_msprobe_case.py
OUT=$(mktemp -d /tmp/msbench.XXXXXX)
run() {  # name tool task level
  local pp extra=()
  if [ "$2" = msprobe ]; then pp=target/msprobe-1.1.1; extra=(--shim --shim_norm); else pp=python; fi
  [ "$2" = blocking ] && extra=(--launch_blocking)
  (cd "$OUT" && PYTHONPATH="$OLDPWD/$pp" MSPROBE_LIB="$OLDPWD/target/release/libmsprobe.so" MSPROBE_LOG_LEVEL=3 \
     "$OLDPWD/$PY" "$OLDPWD/$DRIVER" "$1" "$3" "$4" --out "$OUT" --steps "$STEPS" --cfg_dir "$OUT/cfgs" "${extra[@]}" \
     2>/dev/null | grep '^\[case\] step' | sed 's/.* time \([0-9.]*\)s.*/\1/' > "$OUT/$1.time")
}
run none_rs blocking none L1
run rs_L1 ours statistics L1
run rs_L0 ours statistics L0
run none_mp msprobe none L1
run mp_L1 msprobe statistics L1
run mp_L0 msprobe statistics L0
"$PY" - "$OUT" <<'PYEOF'
import json, sys, os
out = sys.argv[1]
import statistics
t = lambda n: statistics.median(float(x) for x in open(os.path.join(out, n + ".time")).read().split()[1:])
recs = lambda n: len(json.load(open(os.path.join(out, n, "step1", "rank", "dump.json")))["data"])
# msprobe-rs turns on mindspore.runtime.launch_blocking (synchronous launch: a host read of a tensor then
# costs microseconds instead of a 3-5 ms pipeline wait), so each tool is measured against the no-dump
# run in its own launch mode.
b_rs, b_mp = t("none_rs"), t("none_mp")
print(f"no dump: {b_mp*1e3:.1f} ms/step (MindSpore default, async launch), {b_rs*1e3:.1f} ms/step (launch_blocking)")
print("| case | records/step | msprobe 1.1.1 ms/step | msprobe-rs ms/step | msprobe 1.1.1 us/record | msprobe-rs us/record | ratio |")
print("|---|---|---|---|---|---|---|")
for lvl in ("L1", "L0"):
    n = recs(f"rs_{lvl}"); nm = recs(f"mp_{lvl}")
    mp, rs = t(f"mp_{lvl}"), t(f"rs_{lvl}")
    cm, cr = (mp - b_mp) / nm * 1e6, max(rs - b_rs, 0.0) / n * 1e6
    print(f"| statistics {lvl} | {n} (msprobe {nm}) | {mp*1e3:.1f} | {rs*1e3:.1f} | {cm:.0f} | {cr:.0f} | 1/{cm/max(cr, 1e-9):.0f} |")
PYEOF
rm -rf "$OUT"
