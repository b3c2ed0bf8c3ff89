"""Grove's side of the model APIs: wire-neutral types (base), the HTTP base (http), the catalog,
one package per vendor (anthropic/, openai/, google/) and the one error hierarchy (errors).
"""
