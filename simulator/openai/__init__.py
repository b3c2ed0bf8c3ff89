"""OpenAI's APIs as the simulator plays them: common (what both share: auth, model check, errors),
responses (`POST /v1/responses`), chat (`/v1/chat/completions`), rules (what each model refuses).
"""
