"""Framework-neutral helpers shared by the framework layers (``msprobe.pytorch``,
``msprobe.mindspore``). Everything here is small and hook-free:

- :mod:`msprobe.core.native` — the library (``lib``, ``enc``, ``last_error``) and ``init_recorder``;
- :mod:`msprobe.core.config` — explicit-argument checks, the ``msprobe_init`` JSON, the few
  effective settings the Python side needs (level, task), read with the recorder's precedence,
  and the API support lists (``support_wrap_ops.yaml``);
- :mod:`msprobe.core.dtypes` — the aclDataType number of each dtype the recorder reads, by name;
- :mod:`msprobe.core.values` — msprobe's encoding of non-tensor leaves onto a record;
- :mod:`msprobe.core.stack` — cheap stack.json frames (``sys._getframe`` + ``linecache``);
- :mod:`msprobe.core.errors` — ``MsprobeException`` (the one class both layers raise) and the logger.

Nothing here computes statistics or writes files: that is the Rust recorder's job.
"""
