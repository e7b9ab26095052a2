"""Framework-neutral helpers shared by the framework layers (``msprobe.pytorch``,
``msprobe.mindspore``). Everything here is small and hook-free:

- :mod:`msprobe.core.native` — the library (``lib``, ``enc``, ``last_error``) and ``init_recorder``;
- :mod:`msprobe.core.config` — explicit-argument checks, the ``msprobe_init`` JSON, and the few
  effective settings the Python side needs (level, task), read with the recorder's precedence;
- :mod:`msprobe.core.values` — msprobe's encoding of non-tensor leaves onto a record;
- :mod:`msprobe.core.stack` — cheap stack.json frames (``sys._getframe`` + ``linecache``);
- :mod:`msprobe.core.errors` — ``MsprobeException`` and the logger.

Nothing here computes statistics or writes files: that is the Rust recorder's job.
"""
