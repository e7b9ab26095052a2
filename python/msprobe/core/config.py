"""Explicit API arguments: type checks (raised where the user made the mistake), the JSON
object handed to ``msprobe_init``, and the few effective settings the hooking code needs.

The recorder (Rust) owns the configuration: defaults < file (``config_path`` or
``MSPROBE_CONFIG``) < ``MSPROBE_*`` environment < explicit arguments. The Python layers only
need ``level`` and ``task`` to decide what to hook; :func:`effective` reads them with the same
precedence (a bad file is the recorder's to report).

Nothing here may hang or crash the job on bad input: the config file is read only when it is a
regular file of at most :data:`MAX_CONFIG_BYTES` (a FIFO would block, ``/dev/zero`` never ends),
without blocking, and a file nested too deep for Python's json (``RecursionError``) is left to
the recorder, which refuses it in one line. Values are quoted through a bounded ``repr``.
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
from typing import Any, Optional

from .errors import MsprobeException, logger

TASKS = ("statistics", "tensor")
LEVELS = ("L0", "L1", "mix", "L2")
#: The recorder's limit on config text (``MAX_CONFIG_BYTES`` in crates/core/src/config.rs).
MAX_CONFIG_BYTES = 16 << 20

_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxstring = _repr.maxother = 80


def show(value: Any) -> str:
    """A value as an error message quotes it: bounded in depth and length (the ``repr`` of a
    list nested 100000 deep raises RecursionError)."""
    return _repr.repr(value)


def _fail(msg: str) -> None:
    logger.error(msg)
    raise MsprobeException(msg)


def check_step(step: Any, key: str = "step") -> None:
    if not isinstance(step, list):
        _fail(f"{key} is invalid, it should be a list")
    for s in step:
        if isinstance(s, bool) or not isinstance(s, (int, str)):
            _fail(f"{key} element {show(s)} must be an integer or string.")
        if isinstance(s, int) and s < 0:
            _fail(f"Each element of {key} must be non-negative, currently it is {s}.")
        if isinstance(s, str):
            parts = s.split("-")
            if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
                _fail(f'{key} element {show(s)} must be an integer or a range string like "3-5".')
            if len(parts) == 2 and int(parts[0]) > int(parts[1]):
                _fail(
                    f"{key} element {show(s)}: the left boundary ({parts[0]}) cannot be greater than "
                    f"the right boundary ({parts[1]})."
                )


def check_args(
    config_path: Any = None, task: Any = None, dump_path: Any = None, level: Any = None, step: Any = None
) -> None:
    """Raises MsprobeException (after one error log line) for an argument of the wrong type or value."""
    if config_path is not None:
        if not isinstance(config_path, str):
            _fail("config_path is invalid, it should be a string")
        if not os.path.isfile(config_path):
            _fail(f"config_path {show(config_path)} is not an existing file")
    if task is not None and task not in TASKS:
        _fail(f"task is invalid, it should be one of {list(TASKS)}")
    if dump_path is not None and not isinstance(dump_path, str):
        _fail("dump_path is invalid, it should be a string")
    if level is not None and level not in LEVELS:
        _fail(f"level is invalid, it should be one of {list(LEVELS)}")
    if step is not None:
        check_step(step)


def init_args(framework: str, config_path: Optional[str] = None, **explicit: Any) -> str:
    """The JSON object for ``msprobe_init``: framework, config_path and the non-None arguments."""
    args: dict[str, Any] = {"framework": framework}
    if config_path is not None:
        args["config_path"] = config_path
    args.update({k: v for k, v in explicit.items() if v is not None})
    return json.dumps(args)


def read_config(path: str) -> Optional[dict]:
    """The config file's top-level object, or None when it cannot be used: not a regular file
    (checked before opening, and again on the descriptor, opened non-blocking), larger than
    MAX_CONFIG_BYTES, not UTF-8 JSON, nested too deep, or not an object. The recorder reports
    why in one line and leaves capture off."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CONFIG_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _file_value(config_path: Optional[str], key: str) -> Optional[Any]:
    path = config_path if config_path is not None else os.environ.get("MSPROBE_CONFIG") or None
    if not path:
        return None
    data = read_config(path)
    return None if data is None else data.get(key)


def effective(key: str, explicit: Optional[Any], config_path: Optional[str], default: Any) -> Any:
    """explicit argument > MSPROBE_{KEY} > config file > default (the recorder's precedence).
    A file value that is not a string is ignored here (the recorder refuses it)."""
    if explicit is not None:
        return explicit
    env = os.environ.get("MSPROBE_" + key.upper(), "").strip()
    if env:
        return env
    v = _file_value(config_path, key)
    return v if isinstance(v, str) else default


def read_support_list(path: str, var: Optional[str] = None) -> dict[str, list[str]]:
    """A layer's API support list (``support_wrap_ops.yaml``: ``category:`` lines followed by
    ``- name`` items), through PyYAML when installed, else that subset read by hand.

    A list that cannot be used (missing, not a regular file, not such a mapping) never stops the
    job: one error names it (`var`: the environment variable it came from) and no API is wrapped."""
    try:
        return _read_support_list(path)
    except Exception as e:
        what = f"{var}={path!r}" if var else f"the API support list {path!r}"
        logger.error(f"{what} is unusable ({e}); no API is captured (modules still are at level L0/mix)")
        return {}


def _read_support_list(path: str) -> dict[str, list[str]]:
    # O_NONBLOCK: a FIFO must not block the job; only a regular file is read
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        with os.fdopen(fd, encoding="utf-8") as f:
            fd = -1
            text = f.read()
    finally:
        if fd >= 0:
            os.close(fd)
    try:
        import yaml  # type: ignore
    except ImportError:
        yaml = None
    if yaml is not None:
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict) or not all(v is None or isinstance(v, list) for v in data.values()):
            raise ValueError("not a mapping of category: [API names]")
        return {str(k): [str(x) for x in (v or [])] for k, v in data.items()}
    out: dict[str, list[str]] = {}
    cur: Optional[list[str]] = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line[0].isspace() and line.endswith(":"):
            cur = out.setdefault(line[:-1].strip(), [])
        elif line.strip().startswith("- ") and cur is not None:
            cur.append(line.strip()[2:].strip().strip("'\""))
        else:
            raise ValueError(f"line {raw.strip()!r} is neither 'category:' nor '- name'")
    return out


_said_switch: set[str] = set()


def env_switch(name: str, default: bool) -> bool:
    """An on/off environment variable: "1" on, "0" off, unset or empty the default; anything else
    is named in one warning and the default is used."""
    raw = os.environ.get(name, "").strip()
    if raw in ("0", "1"):
        return raw == "1"
    if raw and name not in _said_switch:
        _said_switch.add(name)
        logger.warning(f"{name}={raw!r} is not 0 or 1; using the default ({int(default)})")
    return default


def stop_waits() -> bool:
    """Whether `stop()` returns only once dump.json and the tensor files are on disk, as msprobe's
    does (its drivers read dump.json right after it). ``MSPROBE_STOP_FLUSH=0``: it returns at
    once and the writer thread finishes the files."""
    return env_switch("MSPROBE_STOP_FLUSH", True)
