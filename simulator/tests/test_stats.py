"""Device-traffic counters (cannsimStatsJson / CANNSIM_STATS) against the known traffic of a ctypes program."""

import json

from conftest import run_py

PROGRAM = """
import json, threading
acl = cs.Acl()
s = acl.stream()
A = acl.tensor(np.ones((2, 3), np.float32)); B = acl.tensor(np.ones((2, 3), np.float32))
Y = acl.tensor(shape=(2, 3))
stats = acl.fn(acl.rt, "cannsimStatsJson", C.c_size_t, [C.c_char_p, C.c_size_t])
acl.fn(acl.rt, "cannsimStatsReset", None, [])()

dev = acl.malloc(4096)
host = np.zeros(1000, np.uint8)
for _ in range(2):                                   # 2 sync H2D copies of 1000 bytes
    acl.check("h2d", acl.call("aclrtMemcpy", dev, 4096, host.ctypes.data, 1000, cs.H2D))
out = np.zeros(64, np.uint8)                         # 1 async D2H copy of 64 bytes
acl.check("d2h", acl.call("aclrtMemcpyAsync", out.ctypes.data, 64, dev, 64, cs.D2H, s))
acl.check("d2d", acl.call("aclrtMemcpy", dev + 2048, 2048, dev, 10, 3))   # 1 sync D2D of 10 bytes
for _ in range(3):                                   # 3 pinned allocations (one freed)
    hp = VP()
    acl.check("mh", acl.call("aclrtMallocHost", C.byref(hp), 4096))
acl.check("fh", acl.call("aclrtFreeHost", hp))
for _ in range(3):
    acl.run("Add", A, B, 1.0, Y, stream=s)           # 3 aclnn launches
acl.run("Mul", A, B, Y, stream=s)                    # 1 more
for _ in range(2):
    acl.sync(s)                                      # 2 stream syncs on the main thread
ev = VP()
acl.check("ev", acl.call("aclrtCreateEvent", C.byref(ev)))
acl.check("rec", acl.call("aclrtRecordEvent", ev, s))
acl.check("sev", acl.call("aclrtSynchronizeEvent", ev))        # 1 event sync
s2 = acl.stream()
acl.check("wait", acl.call("aclrtStreamWaitEvent", s2, ev))    # 1 stream wait request

def worker():
    C.CDLL(None).prctl(15, b"syncer", 0, 0, 0)      # PR_SET_NAME: the OS thread name
    for _ in range(4):
        acl.sync(s2)                                 # 4 stream syncs on thread "syncer"
    acl.check("dev", acl.call("aclrtSynchronizeDevice"))       # 1 device sync there
t = threading.Thread(target=worker, name="syncer")
t.start(); t.join()
buf = C.create_string_buffer(1 << 16)
n = stats(buf, len(buf))
print(json.dumps({"n": n, "stats": json.loads(buf.value.decode())}))
"""


def check(st, main_tid=None):
    c = st["copies"]
    assert c["host_to_device"] == {"sync": {"copies": 2, "bytes": 2000}, "async": {"copies": 0, "bytes": 0}}
    assert c["device_to_host"] == {"sync": {"copies": 0, "bytes": 0}, "async": {"copies": 1, "bytes": 64}}
    assert c["device_to_device"]["sync"] == {"copies": 1, "bytes": 10}
    assert c["host_to_host"]["sync"]["copies"] == 0
    assert st["memory"]["pinned_allocs"] == 3
    assert st["kernels"]["aclnn"] == {"launches": 4, "ops": {"aclnnAdd": 3, "aclnnMul": 1}}
    assert st["kernels"]["aclop"]["launches"] == 0 and st["kernels"]["hccl"]["launches"] == 0
    by_name = {t["name"]: t for t in st["threads"]}
    assert by_name["syncer"]["stream_syncs"] == 4 and by_name["syncer"]["device_syncs"] == 1
    main = [t for t in st["threads"] if t["name"] != "syncer"]
    assert len(main) == 1
    m = main[0]
    assert (m["stream_syncs"], m["event_syncs"], m["stream_wait_events"], m["device_syncs"]) == (2, 1, 1, 0)


def test_stats_json_counts_known_traffic():
    p = run_py(PROGRAM)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["n"] > 100
    check(r["stats"])


def test_cannsim_stats_file_written_at_exit(tmp_path):
    path = tmp_path / "stats-{pid}.json"
    p = run_py(PROGRAM + "\nprint('pid', __import__('os').getpid())\n", env={"CANNSIM_STATS": str(path)})
    pid = p.stdout.strip().splitlines()[-1].split()[1]
    f = tmp_path / f"stats-{pid}.json"
    st = json.loads(f.read_text())
    assert st["pid"] == int(pid)
    check(st)
