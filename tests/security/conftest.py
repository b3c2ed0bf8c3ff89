"""Fixtures for the security checks: the integration tests' module Grove, store and store URL.

Each module of tests/security reproduces one finding of the audit and fails if it comes back.
"""

from tests.integration.conftest import grove, pytest_configure, store, store_url

__all__ = ["grove", "pytest_configure", "store", "store_url"]
