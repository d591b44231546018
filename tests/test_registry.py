"""The registry: rpc_method, autodiscovery, duplicate names, reserved names, built-ins, system checks."""

import pytest

from jsonrpc_app import AlreadyRegistered, Method, MethodRegistry, NotRegistered, registry, rpc_method
from jsonrpc_app.checks import check_settings


@pytest.fixture
def fresh():
    return MethodRegistry(name="fresh")


def test_bare_decorator_uses_the_function_name(fresh):
    @rpc_method(registry=fresh)
    def subtract(a, b):
        return a - b

    assert fresh.get("subtract").func is subtract
    assert subtract(3, 1) == 2  # the function is returned unchanged


def test_decorator_with_explicit_name(fresh):
    @rpc_method(name="math.add", registry=fresh)
    def add(a, b):
        return a + b

    assert "math.add" in fresh
    assert "add" not in fresh


def test_default_registry_is_used_without_registry_argument():
    assert registry.get("subtract") is not None


def test_autodiscovery_imports_rpc_methods_of_installed_apps():
    # examples/rpc_methods.py and tests/testapp/rpc_methods.py are found at start-up.
    assert registry.get("get_data").func.__module__ == "examples.rpc_methods"
    assert registry.get("testapp.boom").func.__module__ == "tests.testapp.rpc_methods"
    assert registry.get("get_data").app_label == "examples"


def test_duplicate_name_is_refused_at_registration_naming_both(fresh):
    def first():
        pass

    def second():
        pass

    fresh.register(first, "dup")
    with pytest.raises(AlreadyRegistered) as raised:
        fresh.register(second, "dup")
    message = str(raised.value)
    assert "test_registry" in message
    assert ".first" in message and ".second" in message
    assert "'fresh'" in message
    assert fresh.get("dup").func is first  # not a silent override


def test_duplicate_name_is_refused_by_the_decorator_too(fresh):
    @rpc_method(name="dup", registry=fresh)
    def first():
        pass

    with pytest.raises(AlreadyRegistered):

        @rpc_method(name="dup", registry=fresh)
        def second():
            pass

    assert fresh.get("dup").func is first


def test_the_same_name_in_two_registries_is_not_a_duplicate(fresh):
    def ping():
        pass

    other = MethodRegistry("other")
    fresh.register(ping)
    other.register(lambda: None, "ping")
    assert fresh.get("ping").func is ping


def test_registering_the_same_function_twice_is_not_a_duplicate(fresh):
    def same():
        pass

    first = fresh.register(same)
    again = fresh.register(same)
    assert fresh.get("same") is again and again.func is first.func is same
    assert [m.name for m in fresh if m.name == "same"] == ["same"]


def test_builtins_are_served_by_registries_built_before_and_after_they_are_added():
    before = MethodRegistry("before")

    def hello():
        return "hi"

    builtin = Method(hello, "rpc.test_hello", hidden=True)
    try:
        MethodRegistry.add_builtin(builtin)
        after = MethodRegistry("after")
        assert before.get("rpc.test_hello") is builtin
        assert after.get("rpc.test_hello") is builtin
        assert registry.get("rpc.test_hello") is builtin
    finally:
        del MethodRegistry.builtins["rpc.test_hello"]
        for r in (before, after, registry):
            r._registry.pop("rpc.test_hello", None)


def test_a_builtin_needs_a_reserved_name():
    with pytest.raises(ValueError, match="rpc."):
        MethodRegistry.add_builtin(Method(lambda: None, "hello"))


def test_reserved_prefix_is_refused(fresh):
    with pytest.raises(ValueError, match="reserved"):
        fresh.register(lambda: None, "rpc.thing")


def test_unregister(fresh):
    fresh.register(lambda: None, "gone")
    fresh.unregister("gone")
    assert fresh.get("gone") is None
    with pytest.raises(NotRegistered):
        fresh.unregister("gone")


def test_failed_autodiscovery_import_rolls_the_registry_back(tmp_path, monkeypatch):
    import importlib
    import types

    from django.utils import module_loading

    before = dict(registry._registry)
    pkg = tmp_path / "brokenapp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rpc_methods.py").write_text(
        "from jsonrpc_app import rpc_method\n"
        "@rpc_method(name='half.registered')\n"
        "def f():\n    pass\n"
        "raise ImportError('boom')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    app = types.SimpleNamespace(name="brokenapp", module=importlib.import_module("brokenapp"))
    from django.apps import apps

    monkeypatch.setattr(apps, "get_app_configs", lambda: [app])
    with pytest.raises(ImportError):
        module_loading.autodiscover_modules("rpc_methods", register_to=registry)
    assert "half.registered" not in registry
    assert dict(registry._registry) == before


def test_unknown_setting_key_is_a_check_error(settings):
    settings.JSONRPC = {"LOG_POLICY": "all", "MAX_BATCH": 3}
    errors = check_settings()
    assert [e.id for e in errors] == ["jsonrpc_app.E001"]
    assert "MAX_BATCH" in errors[0].msg


def test_settings_are_read_over_defaults_and_follow_changes(settings):
    from jsonrpc_app.conf import jsonrpc_settings

    assert jsonrpc_settings.MAX_BATCH_SIZE == 1000
    settings.JSONRPC = {"MAX_BATCH_SIZE": 5}
    assert jsonrpc_settings.MAX_BATCH_SIZE == 5
    with pytest.raises(AttributeError):
        jsonrpc_settings.NOT_A_SETTING
