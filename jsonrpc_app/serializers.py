"""
DRF serializers at the edges of a call: ``params_serializer`` validates the
named params before the method runs, ``result_serializer`` turns what the
method returns (a model instance, a queryset, a list) into JSON.

    @rpc_method(params_serializer=OrderSerializer, result_serializer=OrderOut)
    def place_order(sku, quantity, note=""):
        return Order.objects.create(sku=sku, quantity=quantity, note=note)

The method is called with ``serializer.validated_data`` as keyword
arguments. Errors raise DRF's ValidationError, which the dispatcher answers
as ``-32602 Invalid params`` with DRF's error dict (``get_full_details()``:
``{"quantity": [{"message": "...", "code": "min_value"}]}``) in ``data``.
"""

from django.db.models import Manager, QuerySet


def serializer_context(context):
    """The ``context`` DRF serializers get: the request (for CurrentUserDefault) and the call."""
    return {
        "request": getattr(context, "request", None),
        "call_context": context,
        "view": None,
    }


def validate_params(method, args, kwargs, context):
    """Validate bound params with ``method.params_serializer``; return (args, kwargs) for the call."""
    context_name = method.binder.context_name
    data = dict(kwargs)
    if context_name is not None:
        data.pop(context_name, None)
    serializer = method.params_serializer(data=data, context=serializer_context(context))
    serializer.is_valid(raise_exception=True)
    validated = dict(serializer.validated_data)
    if context_name is not None:
        validated[context_name] = context
    return (), validated


def serialize_result(method, result, context):
    """Return ``result`` serialised with ``method.result_serializer`` (None stays None)."""
    if result is None:
        return None
    if isinstance(result, Manager):
        result = result.all()
    many = isinstance(result, (QuerySet, list, tuple))
    serializer = method.result_serializer(result, many=many, context=serializer_context(context))
    return serializer.data
