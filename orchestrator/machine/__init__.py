"""The transition kit every state machine shares: the Store base (store.py), the base of
every transition input (transition.py), the Lua loader and the helpers scripts include
(scripts.py, lua/)."""
