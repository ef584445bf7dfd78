"""Signals the session store sends to the apps above it (which it must not import).

`budget_exceeded` is sent inside the transaction that paused a session because its budget ran
out, after the pause is written: a receiver's writes (the handoff app opens a `budget` handoff)
commit or roll back with the pause. Receivers are connected in their AppConfig.ready().
Keyword arguments: session (the locked Session, now paused), reason (str), actor (Actor).
"""

from django.dispatch import Signal

budget_exceeded = Signal()
