"""msprobe.mindspore.common.utils: ``MsprobeStep`` (a ``mindspore.train`` callback) and ``seed_all``."""

from __future__ import annotations

import mindspore as ms

from ..seed import remove_dropout, seed_all  # noqa: F401


class MsprobeStep(ms.train.Callback):
    """Dumps each training step of ``mindspore.train.Model.train``: start() at step begin, stop() and
    step() at step end. For L0/mix the model is the one given to ``start(model=...)`` before training,
    or else the network being trained (``cb_params.network``)."""

    def __init__(self, debugger):
        super().__init__()
        self.debugger = debugger

    def on_train_step_begin(self, run_context):
        d = self.debugger
        if getattr(d, "level", None) in ("L0", "mix") and getattr(d, "model", None) is None:
            d.start(model=run_context.original_args().network)
        else:
            d.start()

    def on_train_step_end(self, run_context):
        self.debugger.stop()
        self.debugger.step()
