"""The ASGI application uvicorn serves in the async benchmark (bench.over_asgi)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
application = get_asgi_application()
