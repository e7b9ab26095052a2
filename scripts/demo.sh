#!/usr/bin/env bash
# The main job: the example MLP trains on the CANN simulator, first as it is, then captured at
# kernel level with no code change (LD_PRELOAD), on 1 and on 2 ranks; prints where the dumps are
# and what they hold.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
target=${CARGO_TARGET_DIR:-$PWD/target}
lib64=$(bash scripts/sim-install.sh | tail -n 1)
export LD_LIBRARY_PATH="$lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
py=.venv/bin/python
dump=${DEMO_DUMP:-$target/demo-dump}
rm -rf "$dump" "$dump-2ranks"

echo "== examples/train.py on the simulated Ascend device, uncaptured"
$py examples/train.py --steps 3

echo
echo "== the same job captured at kernel level: LD_PRELOAD=libmsprobe.so MSPROBE_LEVEL=L2 (no code change)"
# A training step of train.py ends with its fifth InplaceAdd launch (the last SGD update).
LD_PRELOAD="$target/release/libmsprobe.so" MSPROBE_LEVEL=L2 MSPROBE_TASK=statistics MSPROBE_SUMMARY_MODE=md5 \
  MSPROBE_DUMP_PATH="$dump" MSPROBE_STEP_END_OP=InplaceAdd MSPROBE_STEP_END_COUNT=5 \
  $py examples/train.py --steps 3
echo
echo "dump written to $dump:"
"$target/release/msprobe" summary "$dump"

echo
echo "== data-parallel on 2 ranks (HCCL AllReduce), captured with tensor files"
LD_PRELOAD="$target/release/libmsprobe.so" MSPROBE_LEVEL=L2 MSPROBE_TASK=tensor MSPROBE_FRAMEWORK=mindspore \
  MSPROBE_DUMP_PATH="$dump-2ranks" MSPROBE_STEP_END_OP=InplaceAdd MSPROBE_STEP_END_COUNT=5 MSPROBE_LOG_LEVEL=2 \
  $py examples/train.py --steps 2 --ranks 2
echo
echo "dump written to $dump-2ranks:"
"$target/release/msprobe" summary "$dump-2ranks"
