"""
`pip install .` into a fresh venv, then a minimal project (not this repo's)
serves a method from its own app's rpc_methods.py.
"""

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_pip_installed_app_serves_methods_of_another_app(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Build from a copy so the repo's own build/ and egg-info stay untouched.
    src = tmp_path / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".venv*", ".git", "*.egg-info", "build", "__pycache__", "db.sqlite3*", "node_modules",
            "test-artifacts", ".hypothesis", ".pytest_cache", "spool",
        ),
    )
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(src)], capture_output=True, text=True
    )
    assert install.returncode == 0, install.stderr

    project = tmp_path / "otherproject"
    (project / "shop").mkdir(parents=True)
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "rpc_methods.py").write_text(
        textwrap.dedent(
            """
            from jsonrpc_app import rpc_method

            @rpc_method(name="shop.total")
            def total(prices: list) -> float:
                \"\"\"Add up the prices.\"\"\"
                return sum(prices)
            """
        )
    )
    (project / "settings.py").write_text(
        textwrap.dedent(
            """
            SECRET_KEY = "x"
            DEBUG = False
            ALLOWED_HOSTS = ["testserver"]
            ROOT_URLCONF = "urls"
            INSTALLED_APPS = [
                "django.contrib.auth",
                "django.contrib.contenttypes",
                "rest_framework",
                "jsonrpc_app",
                "shop",
            ]
            DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
            USE_TZ = True
            JSONRPC = {"LOG_POLICY": "all"}
            """
        )
    )
    (project / "urls.py").write_text(
        'from django.urls import include, path\nurlpatterns = [path("api/rpc/", include("jsonrpc_app.urls"))]\n'
    )
    (project / "run.py").write_text(
        textwrap.dedent(
            """
            import json, os
            os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
            import django
            django.setup()
            from django.core.management import call_command
            call_command("migrate", verbosity=0)
            call_command("check")
            import jsonrpc_app
            from django.test import Client
            body = {"jsonrpc": "2.0", "method": "shop.total", "params": [[1.5, 2.5]], "id": "a"}
            response = Client().post("/api/rpc/", json.dumps(body), content_type="application/json")
            from jsonrpc_app.log import loader
            loaded = loader.load_pending()  # the journal (the default writer), loaded now
            from jsonrpc_app.models import Call
            print(json.dumps({
                "status": response.status_code,
                "answer": json.loads(response.content),
                "module": jsonrpc_app.__file__,
                "logged": list(Call.objects.values_list("method", flat=True)),
            }))
            """
        )
    )
    run = subprocess.run([str(python), "run.py"], cwd=project, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["status"] == 200
    assert out["answer"] == {"jsonrpc": "2.0", "result": 4.0, "id": "a"}
    assert "site-packages" in out["module"]  # the installed copy, not the repo
    assert out["logged"] == ["shop.total"]
