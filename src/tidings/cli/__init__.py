"""The ``tidings`` command line (``app.py``: the app and ``main``), one module per command
or group of commands, their shared options and helpers in ``common.py``."""
