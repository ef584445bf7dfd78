"""The WSGI entry point for a separate WSGI server in production (README, "Production"):
plain HTTP only; websockets and settings.SWITCHBOARD_ASYNC_HTTP_PATHS go to config.asgi."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()
