from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
application = get_wsgi_application()

# Tokenizers, URL modules and the upstream client loaded now, as the worker starts, not by the
# first request it serves (gateway.warm).
from gateway.warm import warm_up  # noqa: E402 - needs the application's settings loaded first

warm_up()
