"""The tests' settings for a real server (tests/test_async.py's uvicorn): its own journal and spool directories."""

import os

from tests.settings import *  # noqa: F401,F403
from tests.settings import JSONRPC

JSONRPC = {**JSONRPC, "LOG_JOURNAL_DIR": os.environ["TEST_JOURNAL_DIR"], "SPOOL_DIR": os.environ["TEST_SPOOL_DIR"]}
