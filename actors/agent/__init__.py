"""An agent: one model-backed actor with its own conversation and provider (turn_loop.py).

Its parts, one job a module: its model (choice), tools and their runner, metering of each
request (budget, fleet, billing, estimates), its turn's steps stored as they end, and the
check of a typed answer.
"""
