"""How long the reliability tests wait for something before failing: bounds for a busy machine (two cores
beside other test runs), never timing assertions. A test that passes waits only as long as the thing
takes; a bound is reached only when it would never come."""

# The next message of the in-process ASGI application (a websocket accept, frame or close; an HTTP
# response's start or body), or a connection to a local service.
REPLY_S = 30.0
# A run's start and end on a live server, and one of its API answers.
START_S = 60.0
