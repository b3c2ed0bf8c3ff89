"""The Gemini API as the simulator plays it: generate (`generateContent` and its stream),
request (what a request asks, read), caches (the explicit `cachedContents` entries).
"""
