"""What an image bills as input on each provider, and a PNG's size read from its header.

Shared by snapcompact (supervisor/snapcompact.py) and the simulator, which counts images so.
"""

from __future__ import annotations

import base64
import binascii
import math

GEMINI_IMAGE_TOKENS = 1_120  # Gemini 3 bills a fixed budget per image at any size
UNREADABLE_SIZE = (1_000, 1_000)  # an image whose size cannot be read is billed as this


def image_tokens(provider: str, width: int, height: int) -> int:
    """Anthropic bills by area (w x h / 750), OpenAI by 32-pixel patches, Gemini a fixed
    budget; any other provider as Anthropic."""
    if provider == "google":
        return GEMINI_IMAGE_TOKENS
    if provider == "openai":
        return math.ceil(width / 32) * math.ceil(height / 32)
    return math.ceil(width * height / 750)


def png_size(data: str) -> tuple[int, int]:
    """Width and height of a base64 PNG (a data URL too), from its header; UNREADABLE_SIZE
    when it is not one."""
    encoded = data.split(",", 1)[1] if data.startswith("data:") else data
    try:
        header = base64.b64decode(encoded[:44])
    except (binascii.Error, ValueError):
        return UNREADABLE_SIZE
    if len(header) < 24 or not header.startswith(b"\x89PNG"):
        return UNREADABLE_SIZE
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
