"""Grove as a service: `grove up` runs Grove with an HTTP API and a live dashboard in a process
of its own; the command line talks to it over HTTP when it is up (server/client.py).
"""
