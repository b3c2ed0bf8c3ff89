"""The Anthropic Messages API as the simulator plays it: messages (the API), request (what a
request asks), rules (what each model refuses), thinking_blocks (signed thinking blocks).
"""
