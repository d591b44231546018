"""
Optional integrations, each needing its extra: ``otel`` (``jsonrpc-app[otel]``,
OpenTelemetry spans and metrics) and ``prometheus`` (``jsonrpc-app[prometheus]``).
Nothing here is imported unless ``JSONRPC["OBSERVERS"]`` names it.
"""
