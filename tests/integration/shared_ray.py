"""One local Ray per test process (each xdist worker's), started when a test's Grove first
needs it and shared by the modules after it: each module's Grove makes a supervisor of its own
in it and stops it at close. Stopped at the session's end and before a module marked `own_ray`.
"""

from __future__ import annotations

from grove.supervisor.local_ray import LocalRay, keep_local_ray_on_loopback, start_ray


class SharedRay:
    """The shared Ray of this process, through the handle `start_ray` gave (its reaper and
    the GROVE_RAY_OWNER mark apply as to any Ray Grove starts)."""

    def __init__(self) -> None:
        self._local: LocalRay | None = None

    def ensure(self) -> None:
        """Ray is initialized in this process: the one running, else the shared one started."""
        keep_local_ray_on_loopback(None)  # before Ray is imported
        import ray

        from grove.supervisor.actor import NAMESPACE

        if ray.is_initialized():
            return
        self.stop()  # shut down by someone else: what is left of it goes first
        self._local = start_ray(None, NAMESPACE)

    def stop(self) -> None:
        """Shut the shared Ray down and stop it; the next `ensure` starts it again."""
        if self._local is None:
            return
        import ray

        ray.shutdown()
        local, self._local = self._local, None
        local.stop()


SHARED_RAY = SharedRay()
