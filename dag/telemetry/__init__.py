"""OpenTelemetry export of recorded runs (OPENPROGRAM_OTLP_ENDPOINT): each node a span as it ends, one
trace per session, named and attributed by the GenAI conventions plus this project's depth.

`spans` turns a node's record into a span; `export` sends them, batched, from the records the write
path publishes after each commit, so a run never waits on it.
"""
