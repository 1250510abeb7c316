"""What a server process serves: `daphne openprogram_web.serve:application`.

The application of `openprogram_web.asgi`, with this process's lease reaper started at once rather than
at the first connection: a server that has just started, with no one looking yet, still writes off the
sessions of a worker or `run_function` that died (nobody else may be left to). Only a server imports
this module; `manage.py` commands and tests import `openprogram_web.asgi`, where the reaper waits for a
first connection, so importing the application starts no thread.
"""
from openprogram_web.asgi import application  # first: it sets Django up

from dag.runs import reaper  # after Django is set up

__all__ = ["application"]

reaper.start()
