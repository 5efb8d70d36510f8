"""The transition kit every state machine shares: the Store base (store.py), the base of
every transition input (transition.py), the Lua loader and the helpers scripts include
(scripts.py, lua/), and the sweeper's shape every machine's re-driver takes (sweeper.py)."""
