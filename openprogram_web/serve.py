"""What a server process serves: `daphne openprogram_web.serve:application`.

The application of `openprogram_web.asgi`, with this process's lease reaper started at once rather than
at the first connection: a server that has just started, with no one looking yet, still writes off the
sessions of a worker or `run_function` that died (nobody else may be left to). And the process says it
is a server: its runs' node writes go to a writer process of its own (OPENPROGRAM_WRITER=auto), started
now. Only a server imports this module; `manage.py` commands and tests import `openprogram_web.asgi`,
where the reaper waits for a first connection, so importing the application starts no thread.
"""
from openprogram_web.asgi import application  # first: it sets Django up

from dag.recording.write_path import process_writer  # after Django is set up
from dag.runs import reaper

__all__ = ["application"]

reaper.start()
process_writer.serving_process()
