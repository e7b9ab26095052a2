#!/usr/bin/env bash
# The main job: trains the example MLP on the CANN simulator (1 rank, then 2 ranks with HCCL),
# then writes a real msprobe dump through the C ABI and summarises it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
target=${CARGO_TARGET_DIR:-$PWD/target}
lib64=$(bash scripts/sim-install.sh | tail -n 1)
py=.venv/bin/python

echo "== examples/train.py on the simulated Ascend device (1 rank)"
LD_LIBRARY_PATH="$lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" $py examples/train.py --steps 10
echo "== examples/train.py data-parallel on 2 ranks (HCCL AllReduce)"
LD_LIBRARY_PATH="$lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" $py examples/train.py --steps 5 --ranks 2

echo "== a dump written through libmsprobe's C ABI"
dump=${DEMO_DUMP:-$PWD/target/demo-dump}
rm -rf "$dump"
cc -O2 -o "$target/capi_demo" examples/capi_demo.c -L"$target/release" -lmsprobe -Wl,-rpath,"$target/release"
"$target/capi_demo" "$dump"
"$target/release/msprobe" summary "$dump"
