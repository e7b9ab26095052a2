"""The installed tree: every client file name resolves every symbol; prefix rules of sim-install.sh."""

import ctypes as C
import os
import shutil
import subprocess

from conftest import LIB64, REPO

NAMES = [
    "libascendcl.so",
    "libacl_op_compiler.so",
    "libnnopbase.so",
    "libopapi.so",
    "libhccl.so",
    "libhcomm.so",
    "libopapi_math.so",
    "libaclnn_ops_train.so",
    "libdummy_tls.so",
    "libmsprofiler.so",
    "libacl_tdt_channel.so",
    "libge_runner.so",
    "libgraph.so",
    "libruntime.so",
    "libc_sec.so",
    "libatb.so",
]
SYMBOLS = [
    "aclInit",
    "aclrtMalloc",
    "aclrtGetSocName",
    "aclCreateTensor",
    "aclDestroyAclOpExecutor",
    "aclSetTensorAddr",
    "aclnnAddGetWorkspaceSize",
    "aclnnAdd",
    "aclnnApplyAdamW",
    "aclopExecuteV2",
    "aclopCompileAndExecuteV2",
    "aclCreateTensorDesc",
    "HcclAllReduce",
    "HcclCommInitRootInfo",
    "HcclSetConfig",
    "HcclGroupStart",
    "acltdtCreateChannelWithCapacity",
]


def test_every_name_resolves_every_symbol():
    assert "_" not in LIB64
    assert LIB64.endswith(os.path.join("latest", "lib64"))
    for n in NAMES:
        lib = C.CDLL(os.path.join(LIB64, n))
        for s in SYMBOLS:
            assert hasattr(lib, s), (n, s)
    assert not hasattr(C.CDLL(os.path.join(LIB64, "libopapi.so")), "aclnnNoSuchOpGetWorkspaceSize")


def test_install_script_prefix_rules(tmp_path):
    lib = os.path.join(LIB64, "libcannsim.so")
    script = os.path.join(REPO, "scripts", "sim-install.sh")
    bad = subprocess.run(
        ["bash", script],
        env=dict(os.environ, CANNSIM_PREFIX=str(tmp_path / "with_underscore"), CANNSIM_LIB=lib),
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "CANNSIM_PREFIX" in bad.stderr
    good = f"/tmp/cannsimtest-{os.getpid()}"  # pytest's tmp_path contains '_'
    try:
        for _ in range(2):  # idempotent
            p = subprocess.run(
                ["bash", script],
                env=dict(os.environ, CANNSIM_PREFIX=good, CANNSIM_LIB=lib),
                capture_output=True,
                text=True,
                check=True,
            )
            assert p.stdout.strip().splitlines()[-1] == good + "/latest/lib64"
        assert os.readlink(good + "/latest/lib64/libascendcl.so") == "libcannsim.so"
    finally:
        shutil.rmtree(good, ignore_errors=True)
