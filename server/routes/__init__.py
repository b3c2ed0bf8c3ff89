"""The HTTP API's routes, one router per resource, each a function of what it serves;
server/app.py assembles them. No route is defined anywhere else.
"""
