"""The provider simulator: a real HTTP server speaking the Anthropic, OpenAI and Gemini wires.

Tests, demos and benchmarks run against it; the vendors' official SDKs are its referees.
Each vendor's API lives in a package of its own (anthropic/, openai/, google/), as in providers/.
"""

from grove.simulator.config import DEFAULT_API_KEY, SimulatorConfig
from grove.simulator.directives import Directive, DirectiveError, parse_directives
from grove.simulator.runners import SimulatorThread, base_urls, run_forever
from grove.simulator.server import Simulator

__all__ = [
    "DEFAULT_API_KEY",
    "Directive",
    "DirectiveError",
    "Simulator",
    "SimulatorConfig",
    "SimulatorThread",
    "base_urls",
    "parse_directives",
    "run_forever",
]
