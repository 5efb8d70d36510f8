"""Gemini's explicit caching for batches: one cached content per shared prefix.

The lines of a batch built from one template send the same system instruction and tools
on every step. Gemini caches a repeated prefix on its own (implicitly, no saving
guaranteed); an explicit cached content guarantees it: created once with that prefix and
a TTL, named by each request in place of the fields it holds (`cachedContent`), its
tokens billed at the cached price. Here:

- `prefix.py` (pure): whether a request's prefix is long enough to cache, the create
  body, and the digest that names it;
- `store.py`: the batch's records in Redis, so that exactly one worker creates each
  cached content and the others wait for its name;
- `api.py`: the cachedContents create and delete calls;
- `explicit.py`: a step's request with its batch's cached content, and the batch's end,
  which deletes them (a dead fleet's expire by their TTL).
"""
