"""The HTTP API's routes, one router per resource; server/app.py assembles them."""
