"""How large a stored message may be; a leaf, so that the command line can check its input
against it without loading a store.
"""

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
