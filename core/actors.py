"""Who performs a domain operation; every service takes one and records its label."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from core.models import ApiKey


@dataclass(frozen=True)
class Actor:
    """Who performs a domain operation: an agent (API key), a human (user) or the system."""

    label: str
    user: Optional["AbstractBaseUser"] = None
    api_key: Optional["ApiKey"] = None

    @classmethod
    def for_key(cls, api_key: "ApiKey") -> "Actor":
        return cls(label=f"key:{api_key.prefix}", api_key=api_key)

    @classmethod
    def for_user(cls, user: "AbstractBaseUser") -> "Actor":
        return cls(label=f"user:{user.get_username()}", user=user)

    @classmethod
    def system(cls, name: str = "system") -> "Actor":
        return cls(label=name)
