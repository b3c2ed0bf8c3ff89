"""The supervisor's side of the price tiers (SPEC 20): one collector per provider and key that
gathers steps on the batch tier into provider batches, keeps them in the store, polls them
and routes each result back to its step (plan.py, collector.py, desk.py).
"""
