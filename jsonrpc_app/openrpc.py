"""
The OpenRPC description of a registry's methods.

``document(registry)`` builds an OpenRPC 1.3 document: ``info`` from the
``OPENRPC_INFO`` setting, the endpoint as ``servers``, and per method its
params as content descriptors whose JSON Schemas come from the annotations
(or the params serializer), its result, its docstring, its declared
``errors`` and its ``paramStructure``. Methods registered with
``hidden=True`` (and disabled ones) are left out.

Every registry serves it as the reserved method ``rpc.discover`` (added to
every registry by ``AppConfig.ready()``, and run by the dispatcher like any method); the
endpoint also serves it at ``GET <endpoint>openrpc.json``.

For other code (the admin's method browser): ``method_schema(method)``
describes one method with its schemas inline, ``params_schema(method)`` is
one JSON Schema for its params by name, and ``params_skeleton(method)`` is
an example params value that the method accepts.
"""

import dataclasses
import inspect
import re

from . import types
from .context import CallContext
from .registry import Method
from .types import FORMAT_EXAMPLES, jsonable

OPENRPC_VERSION = "1.3.2"
DISCOVER = "rpc.discover"

P = inspect.Parameter


class SchemaBuilder:
    """
    JSON Schemas for annotations, read from their ``jsonrpc_app.types`` nodes.

    ``mode`` is "input" (what params accept) or "output" (how results are
    written). With ``components`` (a dict), dataclasses, TypedDicts and enums
    become named schemas referred to by ``$ref``; without, all is inline.
    """

    def __init__(self, mode="input", components=None):
        self.mode = mode
        self.components = components
        self._names = {}  # (cls, mode) -> component name
        self._building = set()

    def schema(self, annotation):
        return self.node_schema(types.normalise(annotation))

    def node_schema(self, node):
        kind = node.kind
        if kind == types.LEAF:
            leaf = node.leaf
            if self.mode == "output" and leaf.output_schema is not None:
                return dict(leaf.output_schema)
            return dict(leaf.schema)
        if kind == types.UNION:
            members = [self.node_schema(n) for n in node.args]
            if any(m == {} for m in members):
                return {}
            unique = []
            for m in members:
                if m not in unique:
                    unique.append(m)
            return unique[0] if len(unique) == 1 else {"anyOf": unique}
        if kind == types.LITERAL:
            return _enum_schema({}, [jsonable(a) for a in node.values])
        if kind == types.LIST:
            # "items" always present: client generators choke on an array without it.
            schema = {"type": "array", "items": self.node_schema(node.args[0])}
            if node.cls in (set, frozenset):
                schema["uniqueItems"] = True
            return schema
        if kind == types.TUPLE:
            return {
                "type": "array",
                "items": [self.node_schema(n) for n in node.args],
                "minItems": len(node.args),
                "maxItems": len(node.args),
                "additionalItems": False,
            }
        if kind == types.DICT:
            key, value = node.args
            schema = {"type": "object"}
            value = self.node_schema(value)
            if value != {}:
                schema["additionalProperties"] = value
            if key.kind == types.LEAF and key.leaf.key_pattern:
                schema["propertyNames"] = {"pattern": key.leaf.key_pattern}
            return schema
        if kind == types.ENUM:
            return self._named(node.cls, self._enum)
        if kind == types.TYPEDDICT:
            return self._named(node.cls, self._typeddict)
        if kind == types.DATACLASS:
            return self._named(node.cls, self._dataclass)
        if kind == types.QUERYSET:
            return {"type": "array", "items": {}}
        return {}

    def _named(self, cls, build):
        key = (cls, self.mode)
        if self.components is None:
            if key in self._building:
                # A type that contains itself, inline: the inner level is left open.
                return {"title": cls.__name__}
            self._building.add(key)
            try:
                return build(cls)
            finally:
                self._building.discard(key)
        name = self._names.get(key)
        if name is None:
            name = self._component_name(cls)
            self._names[key] = name
            self.components[name] = {}  # reserved while building (recursion)
            built = build(cls)
            # The same schema in both modes is one component.
            for (other_cls, other_mode), other_name in list(self._names.items()):
                if other_cls is cls and other_name != name and self.components.get(other_name) == built:
                    del self.components[name]
                    self._names[key] = name = other_name
                    break
            else:
                self.components[name] = built
        return {"$ref": "#/components/schemas/%s" % name}

    def _component_name(self, cls):
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", cls.__qualname__.replace("<locals>.", ""))
        if self.mode == "output":
            existing = [n for (c, m), n in self._names.items() if c is cls and m != self.mode]
            if existing:
                base = existing[0] + "Result"
        name = base
        n = 2
        while name in self.components:
            name = "%s%d" % (base, n)
            n += 1
        return name

    def _enum(self, cls):
        schema = _enum_schema({"title": cls.__name__}, [jsonable(m.value) for m in cls])
        doc = _class_doc(cls)
        if doc:
            schema["description"] = doc
        return schema

    def _object(self, cls, properties, required):
        schema = {"title": cls.__name__, "type": "object", "properties": properties}
        if required:
            schema["required"] = required
        if self.mode == "input":
            schema["additionalProperties"] = False
        doc = _class_doc(cls)
        if doc:
            schema["description"] = doc
        return schema

    def _typeddict(self, cls):
        fields = types.typeddict_fields(cls)
        properties = {f.name: self.schema(f.annotation) for f in fields}
        return self._object(cls, properties, [f.name for f in fields if f.required])

    def _dataclass(self, cls):
        properties = {}
        required = []
        if self.mode == "input":
            for f in types.dataclass_fields(cls):
                properties[f.name] = s = self.schema(f.annotation)
                if f.default is not dataclasses.MISSING:
                    _set_default(s, f.default)
                elif f.required:
                    required.append(f.name)
        else:
            for f in types.dataclass_fields(cls, init_only=False):
                properties[f.name] = self.schema(f.annotation)
                required.append(f.name)
        return self._object(cls, properties, required)


def _enum_schema(schema, values):
    schema["enum"] = values
    kind = types.common_type(values)
    if kind:
        schema["type"] = kind
    return schema


def _set_default(schema, value):
    try:
        schema["default"] = jsonable(value)
    except TypeError:
        pass


def _class_doc(cls):
    doc = cls.__dict__.get("__doc__")
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "(")):
        return ""  # the generated dataclass signature says nothing
    return inspect.cleandoc(doc)


# -- DRF serializers -------------------------------------------------------------


def _serializer_instance(serializer):
    return serializer() if isinstance(serializer, type) else serializer


def serializer_fields(serializer, mode):
    """[(name, field)] of a serializer that params ("input") or results ("output") carry."""
    from rest_framework import serializers

    fields = []
    for name, field in _serializer_instance(serializer).fields.items():
        if isinstance(field, serializers.HiddenField):
            continue
        if mode == "input" and field.read_only:
            continue
        if mode == "output" and field.write_only:
            continue
        fields.append((name, field))
    return fields


def field_schema(field, mode):
    """The JSON Schema of one DRF field."""
    from rest_framework import serializers
    from rest_framework.fields import empty
    from rest_framework.schemas.openapi import AutoSchema

    if isinstance(field, serializers.ListSerializer):
        schema = {"type": "array", "items": serializer_schema(field.child, mode)}
    elif isinstance(field, serializers.Serializer):
        schema = serializer_schema(field, mode)
    elif isinstance(field, serializers.ListField):
        schema = {"type": "array", "items": {}}
        if not isinstance(field.child, serializers._UnvalidatedField):
            schema["items"] = field_schema(field.child, mode)
    elif isinstance(field, serializers.DictField):
        schema = {"type": "object"}
        if not isinstance(field.child, serializers._UnvalidatedField):
            schema["additionalProperties"] = field_schema(field.child, mode)
    elif isinstance(field, (serializers.JSONField, serializers.ReadOnlyField, serializers.SerializerMethodField)):
        schema = {}
    else:
        auto = AutoSchema()
        schema = auto.map_field(field)
        auto.map_field_validators(field, schema)
        if schema.get("type") == "string" and "format" not in schema and "enum" not in schema and not isinstance(
            field, (serializers.CharField, serializers.ChoiceField, serializers.FileField)
        ):
            # AutoSchema's fallback for fields it does not know: say nothing rather than something wrong.
            if not isinstance(field, (serializers.RelatedField, serializers.ManyRelatedField)):
                schema = {}
    if isinstance(field, serializers.CharField) and not field.allow_blank and schema.get("type") == "string":
        schema.setdefault("minLength", 1)
    if field.help_text:
        schema["description"] = str(field.help_text)
    if field.label and mode == "input":
        schema.setdefault("title", str(field.label))
    if field.default is not empty and not callable(field.default):
        _set_default(schema, field.default)
    if getattr(field, "allow_null", False) and schema:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def serializer_schema(serializer, mode):
    """The JSON Schema of the objects a DRF serializer reads ("input") or writes ("output")."""
    instance = _serializer_instance(serializer)
    properties = {}
    required = []
    for name, field in serializer_fields(instance, mode):
        properties[name] = field_schema(field, mode)
        if mode == "input" and field.required:
            required.append(name)
        elif mode == "output":
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    title = type(instance).__name__
    if title not in ("Serializer", "ListSerializer"):
        schema["title"] = title
    return schema


# -- methods ---------------------------------------------------------------------


def param_structure(method):
    """"by-position", "by-name" or "either": how the method takes its params."""
    if method.params_serializer is not None:
        return "by-name"
    binder = method.binder
    kinds = [p.kind for p in binder.params]
    if P.VAR_POSITIONAL in kinds or P.POSITIONAL_ONLY in kinds:
        return "by-position"
    if P.VAR_KEYWORD in kinds or binder.required_keyword_only:
        return "by-name"
    return "either"


def _param_descriptions(doc):
    """{name: text} from ``:param name: text`` lines of a docstring."""
    found = {}
    for match in re.finditer(r"^\s*:param\s+(?:[^:\s]+\s+)?(\w+):\s*(.*)$", doc or "", re.M):
        found[match.group(1)] = match.group(2).strip()
    return found


def _descriptor(name, schema, required, description=None):
    descriptor = {"name": name, "schema": schema, "required": required}
    if description:
        descriptor["description"] = description
    return descriptor


def params_descriptors(method, builder):
    """The content descriptors of the method's params, in order."""
    if method.params_serializer is not None:
        return [
            _descriptor(name, field_schema(field, "input"), bool(field.required))
            for name, field in serializer_fields(method.params_serializer, "input")
        ]
    docs = _param_descriptions(method.doc)
    descriptors = []
    for p in method.binder.params:
        if p.kind is P.VAR_KEYWORD:
            continue  # any further names: said by paramStructure "by-name"
        schema = builder.schema(p.annotation)
        if p.default is not P.empty:
            if p.default is None and schema not in ({}, {"type": "null"}) and "anyOf" not in schema:
                # A parameter defaulting to None also takes an explicit null.
                schema = {"anyOf": [schema, {"type": "null"}]}
            _set_default(schema, p.default)
        required = p.default is P.empty and p.kind is not P.VAR_POSITIONAL
        description = docs.get(p.name)
        descriptor = _descriptor(p.name, schema, required, description)
        if p.kind is P.VAR_POSITIONAL:
            # OpenRPC has no variadic params: this one repeats, each of the schema.
            descriptor["x-variadic"] = True
            descriptor["description"] = (
                (description + " " if description else "")
                + "Variadic: any number of further positional params, each matching this schema."
            )
        descriptors.append(descriptor)
    return descriptors


def result_descriptor(method, builder):
    ret = method.signature.return_annotation
    if method.result_serializer is not None:
        item = serializer_schema(method.result_serializer, "output")
        node = types.normalise(ret)
        if node.kind in (types.TUPLE, types.QUERYSET) or (node.kind == types.LIST and node.cls in (list, tuple)):
            schema = {"type": "array", "items": item}
        elif ret is P.empty:
            schema = {"anyOf": [item, {"type": "array", "items": item}]}
        else:
            schema = item
    else:
        schema = builder.schema(ret)
    return {"name": "result", "schema": schema}


def error_object(error):
    """The OpenRPC error object of a declared error: a JsonRpcError class or instance, or a dict."""
    from .exceptions import JsonRpcError

    if isinstance(error, type) and issubclass(error, JsonRpcError):
        code, message, data = error.code, error.message, error.data
    elif isinstance(error, JsonRpcError):
        code, message, data = error.code, error.message, error.data
    elif isinstance(error, dict) and "code" in error and "message" in error:
        code, message, data = error["code"], error["message"], error.get("data")
    else:
        raise TypeError(
            "Declared errors must be JsonRpcError subclasses with class-level code and "
            "message, not %r" % (error,)
        )
    obj = {"code": code, "message": str(message)}
    if data is not None:
        try:
            obj["data"] = jsonable(data)
        except TypeError:
            pass
    return obj


def method_object(method, builder_in, builder_out):
    obj = {"name": method.name}
    summary = method.summary
    if summary:
        obj["summary"] = summary
    if method.doc:
        obj["description"] = method.doc
    obj["params"] = params_descriptors(method, builder_in)
    obj["result"] = result_descriptor(method, builder_out)
    obj["paramStructure"] = param_structure(method)
    if method.errors:
        obj["errors"] = [error_object(e) for e in method.errors]
    label = _app_label(method)
    if label:
        obj["tags"] = [{"name": label}]
    return obj


def _app_label(method):
    try:
        return method.app_label
    except Exception:
        return None


def method_schema(method):
    """The OpenRPC method object of ``method``, with every schema inline."""
    return method_object(method, SchemaBuilder("input"), SchemaBuilder("output"))


def params_schema(method):
    """One JSON Schema for the method's params given by name (an object)."""
    properties = {}
    required = []
    for d in method_schema(method)["params"]:
        if d.get("x-variadic"):
            continue
        properties[d["name"]] = d["schema"]
        if d["required"]:
            required.append(d["name"])
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if not (method.binder.var_keyword and method.params_serializer is None):
        schema["additionalProperties"] = False
    return schema


def listed_methods(registry):
    """The methods of ``registry`` that the document describes."""
    return [m for m in registry if not m.hidden and m.enabled]


def document(registry, request=None, endpoint=None):
    """Return the OpenRPC document describing ``registry`` (a JSON-able dict)."""
    from .conf import jsonrpc_settings

    info = dict(jsonrpc_settings.OPENRPC_INFO or {})
    info.setdefault("title", "JSON-RPC API")
    info.setdefault("version", "1.0.0")
    components = {}
    builder_in = SchemaBuilder("input", components)
    builder_out = SchemaBuilder("output", components)
    # Output names defer to input names of the same class: share the memo of names.
    builder_out._names = builder_in._names
    methods = [method_object(m, builder_in, builder_out) for m in listed_methods(registry)]
    doc = {
        "openrpc": OPENRPC_VERSION,
        "info": info,
        "servers": [_server(registry, request, endpoint)],
        "methods": methods,
    }
    if components:
        doc["components"] = {"schemas": components}
    return doc


def _server(registry, request, endpoint):
    url = endpoint
    if not url:
        try:
            from django.urls import reverse

            url = reverse("jsonrpc_app:endpoint")
        except Exception:
            url = "/"
    if request is not None and hasattr(request, "build_absolute_uri"):
        try:
            url = request.build_absolute_uri(url)
        except Exception:  # a host Django refuses: keep the path
            pass
    return {"name": registry.name, "url": url}


# -- rpc.discover ------------------------------------------------------------------


def discover(context: CallContext) -> dict:
    """Return the OpenRPC document that describes this endpoint's methods."""
    return document(context.registry, request=context.request, endpoint=context.endpoint)


_discover_method = None


def discover_method() -> Method:
    """The Method of ``rpc.discover``, built once; ``AppConfig.ready()`` adds it to every registry."""
    global _discover_method
    if _discover_method is None:
        _discover_method = Method(discover, DISCOVER, hidden=True)
    return _discover_method


# -- examples ------------------------------------------------------------------------

# The leaf types' own examples, and those of the formats DRF fields state.
_FORMAT_EXAMPLES = {**FORMAT_EXAMPLES, "email": "user@example.com", "uri": "https://example.com/"}


def example(schema, depth=0):
    """A value that ``schema`` accepts, simple and predictable."""
    if depth > 8 or not isinstance(schema, dict):
        return None
    if "default" in schema:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return example(options[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "string" if "string" in kind else kind[0]
    fmt = schema.get("format")
    if kind == "string":
        if fmt in _FORMAT_EXAMPLES:
            return _FORMAT_EXAMPLES[fmt]
        return "x" * int(schema.get("minLength", 0))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, list):
            return [example(s, depth + 1) for s in items]
        return []
    if kind == "object":
        properties = schema.get("properties")
        if properties is None:
            return {}
        return {name: example(s, depth + 1) for name, s in properties.items()}
    return None


def params_skeleton(method):
    """Example params for ``method`` (by name when it takes them so, else by position)."""
    descriptors = method_schema(method)["params"]
    if param_structure(method) == "by-position":
        return [
            example(d["schema"])
            for d in descriptors
            if not (d.get("x-variadic") and d["schema"] == {})
        ]
    return {d["name"]: example(d["schema"]) for d in descriptors}
