"""The Gemini API as the simulator plays it: generate (`generateContent` and its stream), request
(what a request asks), rules (what each model refuses), caches (the `cachedContents` entries).
"""
