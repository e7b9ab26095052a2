"""msprobe-rs: msprobe-compatible precision-debugging dumps, recorded in Rust.

The framework layers (``msprobe.pytorch``, ``msprobe.mindspore``) hook models and APIs and hand
every record to the Rust recorder through :mod:`msprobe._native`.
"""
