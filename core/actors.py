"""Who performs a domain operation; every service takes one and records its label."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    # The project's user model (AUTH_USER_MODEL is Django's default): the type of every
    # foreign key an actor's user is written to.
    from django.contrib.auth.models import User

    from core.models import ApiKey


@dataclass(frozen=True)
class Actor:
    """Who performs a domain operation: an agent (API key), a human (user) or the system."""

    label: str
    user: Optional["User"] = None
    api_key: Optional["ApiKey"] = None

    @classmethod
    def for_key(cls, api_key: "ApiKey") -> "Actor":
        return cls(label=f"key:{api_key.prefix}", api_key=api_key)

    @classmethod
    def for_user(cls, user: "User") -> "Actor":
        return cls(label=f"user:{user.get_username()}", user=user)

    @classmethod
    def system(cls, name: str = "system") -> "Actor":
        return cls(label=name)
