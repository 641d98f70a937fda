"""The lanes: one per priority, each claims deliveries and hands them to the send pipeline.

``lane.py`` is the ``Lane`` protocol the dispatcher drives; ``direct.py`` claims due rows
from the database, ``kafka.py`` consumes the relays' topics; ``progress.py`` counts what a
lane does and restarts one that stalls; ``settings.py`` is their ``[lanes.*]`` section."""
