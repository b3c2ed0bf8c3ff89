"""The Anthropic Messages API as the simulator plays it: messages (the API), request (what a
request asks, checked), thinking_blocks (signed thinking blocks, checked when they come back).
"""
