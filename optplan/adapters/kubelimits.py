"""The default limits of the API requests (``kube.connect``'s), in a module that imports no client: a
command declares them as its flags' defaults without loading the ``kubernetes`` package."""

REQUEST_TIMEOUT = 30.0
"""Default total deadline of one API request, from connecting to the last byte of the answer (seconds)."""
API_DEADLINE = 600.0
"""Default deadline of all the requests of one client (a command's read, or its write), retries included."""
