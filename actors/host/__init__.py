"""A host: many agents in one process, behind the Ray actor `AgentHost` (actor.py).

Its parts, one job a module: what it is handed (tickets), its turns in progress (runs), the
core that holds the agents, idle connection pools, provider jobs, and what it asks upward.
"""
