"""Who did something, as a person reads it: `{{ run.trigger|actor_words }}`."""

from django import template

from switchboard.retention.forms import actor_words as _actor_words

register = template.Library()


@register.filter
def actor_words(label: str) -> str:
    """An actor label ("user:alice", "key:ab12") without the internal prefix."""
    return _actor_words(str(label))
