"""
The demo under an ASGI server: ``uvicorn project.asgi:application``.

Served this way, ``/rpc/`` is the async endpoint (jsonrpc_app.urls_async:
the calls of a batch run concurrently); under WSGI (``project.wsgi``,
``manage.py runserver``) it is the sync one. project/urls.py reads which.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ["JSONRPC_DEMO_SERVER"] = "asgi"
application = get_asgi_application()
